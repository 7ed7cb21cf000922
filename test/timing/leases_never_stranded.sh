#!/usr/bin/env bash
# test/timing/leases_never_stranded.sh -- rp_acquire of a name the session
# holds returns at once.  test/scenarios/leases_never_stranded.sh asserts
# that it returns that same lease; 1.0 first waited on itself until wait_ms
# ran out (10 s here).  5 s is a margin for a busy machine, not the
# expected time (a few ms); timed by the server.
source "$(dirname "$0")/../scenarios/tap.bash"
plan 1

session_open s
# Re-entry is per transaction: within the one that took it.
session_q s "BEGIN" >/dev/null
session_q s "SELECT (rp_acquire('self1', 30000)).fence" >/dev/null
session_timed s "SELECT a.token = b.token FROM rp_acquire('self1', 30000, 10000) a, rp_leases() b WHERE b.name = 'self1'"
session_q s "COMMIT" >/dev/null
within "$TIMED_OUT" "t" "$TIMED_MS" 5000 "rp_acquire of a name the transaction holds returns that lease without waiting on itself for wait_ms (${TIMED_MS:-?} ms)"
session_q s "SELECT rp_release_all()" >/dev/null
session_close s
finish
