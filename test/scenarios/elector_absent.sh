#!/usr/bin/env bash
# elector_absent.sh -- rp_is_leader(name) while the background elector is
# not (yet) running an election the server is configured for.
#
# The elector publishes its elections only once it has started, which is
# after the server accepts connections (and again after a restart of the
# worker).  rp_is_leader(name) for a configured election raised 42704
# ("is not run by this server's elector") in that window, as if it were
# misconfigured, instead of answering false (this server does not lead).
# The window is made permanent here with max_worker_processes = 0, so the
# elector never starts; a name not configured still raises 42704.
source "$(dirname "$0")/tap.bash"
source "$(dirname "$0")/../../scripts/lib.sh"
plan 4

port=$(rp_free_port)
trap 'rp_stop_pg noelector' EXIT
rp_start_pg noelector "$port" "max_worker_processes = 0
redis_primitives.elections = 'ea-1, ea-2'"
NE() { psql -X -At -q -h "$RP_TMP" -p "$port" -d postgres -v VERBOSITY=sqlstate "$@" 2>&1; }
NE -c "CREATE EXTENSION redis_primitives" >/dev/null
# The elector processes here, and on the runner's server, where one runs
# (so the count can see it).
is "$(elector_pids noelector -c) $(elector_pids pg -c)" "0 1" "the elector is not running (the runner's server has one)"
is "$(NE -c "SELECT rp_is_leader('ea-1')")" "f" "a configured election: not the leader (false), not an error"
is "$(NE -c "SELECT rp_is_leader('ea-2')")" "f" "the second configured election too"
is "$(NE -c "SELECT rp_is_leader('ea-other')")" "ERROR:  42704" "a name that is not configured: 42704"
finish
