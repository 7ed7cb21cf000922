#!/usr/bin/env bash
# test/timing/xact_and_exit.sh -- a COMMIT that waits for its release
# (release_at_commit = wait) and meets a hung Redis is not held up past the
# cleanup deadline.  test/scenarios/xact_and_exit.sh
# asserts that it ends with a WARNING, not an error, and what is left; this
# file bounds how long it takes (timed by the server).
source "$(dirname "$0")/../scenarios/tap.bash"
plan 1

session_open s
session_q s "SET redis_primitives.release_at_commit = wait" >/dev/null
session_q s "BEGIN; SELECT rp_acquire_xact('x8', 2000) IS NOT NULL" >/dev/null
kill -STOP "$(cat "$RP_TMP/redis-$REDIS_PORT.pid")"
session_timed s "COMMIT"
kill -CONT "$(cat "$RP_TMP/redis-$REDIS_PORT.pid")"
ended=$(echo "$TIMED_OUT" | grep -q '^WARNING' && ! echo "$TIMED_OUT" | grep -q ERROR && echo "a WARNING")
within "$ended" "a WARNING" "$TIMED_MS" 3000 \
	"COMMIT with Redis hung: a WARNING, not held up past the cleanup deadline (${TIMED_MS:-?} ms)"
session_close s
finish
