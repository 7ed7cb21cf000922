#!/usr/bin/env bash
# no_preload.sh -- the extension without shared_preload_libraries.
#
# Everything that needs no shared memory (locks, the rate limiter, fencing,
# SQL elections) must work when a database owner just runs CREATE EXTENSION
# on a server that does not preload the library; what needs shared memory
# (rp_stats, rp_locks, the background elector) says so with 55000 and a hint.
# A setting defined PGC_POSTMASTER outside preloading ends the backend with
# FATAL ("cannot create PGC_POSTMASTER variables after startup"): that is
# what this file first caught, at the CREATE EXTENSION.
source "$(dirname "$0")/tap.bash"
CUR=$(sed -n "s/^default_version = '\\(.*\\)'$/\\1/p" "$(dirname "$0")/../../redis_primitives.control")
source "$(dirname "$0")/../../scripts/lib.sh"

plan 6

port=$(rp_free_port)
rp_start_pg nopreload "$port" "shared_preload_libraries = ''"
NP="psql -X -At -q -h $RP_TMP -p $port -d postgres"

out=$($NP -c "CREATE EXTENSION redis_primitives" 2>&1)
is "$out" "" "CREATE EXTENSION works without shared_preload_libraries"
is "$($NP -c "SELECT extversion FROM pg_extension WHERE extname = 'redis_primitives'" 2>&1)" "$CUR" \
	"the extension is installed at the current version ($CUR)"
is "$($NP -c "SELECT (rp_acquire('np-1', 10000)).fence IS NOT NULL" 2>&1)" "t" \
	"a lease is taken without preloading"
is "$($NP -c "SELECT rp_ratelimit('np-rl', 1, 60000)" -c "SELECT rp_ratelimit('np-rl', 1, 60000)" 2>&1 | tr '\n' ' ')" "t f " \
	"the rate limiter admits one and refuses the next"
state() { $NP -v VERBOSITY=verbose -c "$1" 2>&1 | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\):.*/\1/p' | head -1; }
is "$(state "SELECT * FROM rp_stats")" "55000" "rp_stats says shared memory is missing (55000)"
is "$(state "SELECT * FROM rp_locks")" "55000" "rp_locks says shared memory is missing (55000)"
rp_stop_pg nopreload
