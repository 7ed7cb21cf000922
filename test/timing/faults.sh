#!/usr/bin/env bash
# test/timing/faults.sh -- how long a call to a failing Redis takes to end.
# test/scenarios/faults.sh asserts what each fault does (the SQLSTATE, what
# is left in the session and in Redis, that the next call works); this file
# times the same faults: each call is timed by the server (session_timed, a
# cancel from its sender's clock to its ERROR's log stamp), and each check
# asserts the ending too (within): a bound met by another error shows
# nothing.
source "$(dirname "$0")/../scenarios/tap.bash"
plan 7

rpid() { cat "$RP_TMP/redis-$REDIS_PORT.pid"; }
# Redis is inside DEBUG SLEEP (its main thread in nanosleep, not epoll_wait).
redis_asleep() { grep -q nanosleep "/proc/$(rpid)/wchan"; }

session_open s
session_q s "SELECT (rp_acquire('warm', 1000)).fence IS NOT NULL; SELECT rp_release_all()" >/dev/null

# 1. Redis not running: 08001 within connect_timeout (1000 ms here).
rp_stop_redis "$REDIS_PORT"
session_timed s "SELECT rp_acquire('f1', 10000)"
within "$TIMED_OUT" "ERROR:  08001" "$TIMED_MS" 3000 "Redis stopped: 08001 within connect_timeout plus a little (${TIMED_MS:-?} ms)"
rp_start_redis "$REDIS_PORT"

# 2. Redis hung three ways: the call ends at command_timeout (1000 ms), not
# long after.  The hang is in place before the call and lasts past it: a
# pause or a stop until it is ended; DEBUG SLEEP ends by itself, so a try
# that a loaded machine let run past its hang is made again, with a hang
# twice as long (as faults.sh does).
hang_ms() {  # label start-hang-cmd end-hang-cmd [ends-by-itself: lasts $hang_s s]
	local label=$1 try from
	hang_s=4
	for try in 1 2 3 4; do
		from=$(now_ms)
		eval "$2"
		sleep 0.2
		session_timed s "SELECT rp_acquire('hang-$label', 3000)"
		[ -z "${4:-}" ] || [ "$(now_ms)" -lt $((from + hang_s * 1000)) ] || [ "$try" -eq 4 ] && break
		diag "$label: try $try ran past the $hang_s s hang (a loaded machine): again, twice as long"
		eval "$3"
		session_q s "SELECT rp_release_all()" >/dev/null
		hang_s=$((hang_s * 2))
	done
	eval "$3"
	within "$TIMED_OUT" "ERROR:  08006" "$TIMED_MS" 4000 "$label: 08006 not long after command_timeout (${TIMED_MS:-?} ms)"
	# The timed-out call's late reply and its unsettled acquire: two
	# statements while Redis answers settle both (faults.sh says why).
	session_q s "SELECT held FROM rp_lock_info('other-$label')" >/dev/null
	session_q s "SELECT 1" >/dev/null
}
hang_ms debug_sleep "redis debug sleep \$hang_s >/dev/null 2>&1 & wait_for 30 redis_asleep" "redis ping >/dev/null" by-itself
hang_ms client_pause "redis client pause 60000 write >/dev/null" "redis client unpause >/dev/null"
hang_ms sigstop "kill -STOP \$(rpid)" "kill -CONT \$(rpid)"

# 3. statement_timeout (300 ms) ends a call to a hung Redis long before
# command_timeout (30 s).
session_q s "SET redis_primitives.command_timeout = '30s'; SET statement_timeout = '300ms'" >/dev/null
kill -STOP "$(rpid)"
session_timed s "SELECT rp_acquire('st', 1000)"
kill -CONT "$(rpid)"
within "$TIMED_OUT" "ERROR:  57014" "$TIMED_MS" 2500 "statement_timeout ends a call to a hung Redis at statement_timeout, not command_timeout (${TIMED_MS:-?} ms)"
session_q s "RESET statement_timeout" >/dev/null

# 4. pg_cancel_backend ends a call to a hung Redis, and a 60 s wait_ms,
# within a second (from the cancel's sending to the cancelled backend's
# ERROR, both on the server's clock: cancel_in and since_cancel).
pid=$(session_pid s)
kill -STOP "$(rpid)"
cancel_in "$pid" "rp_acquire(%cancel"
session_timed s "SELECT rp_acquire('cancel', 1000)"
kill -CONT "$(rpid)"; wait $canceller
el=$(since_cancel "$pid")
within "$TIMED_OUT" "ERROR:  57014" "$el" 1000 "pg_cancel_backend ends a call to a hung Redis within a second (${el:-?} ms)"
session_q s "SELECT held FROM rp_lock_info('nothing')" >/dev/null
redis set "$(key held lock)" someone-else px 120000 >/dev/null
cancel_in "$pid" "rp_acquire(%held"
session_timed s "SELECT rp_acquire('held', 1000, 60000)"; wait $canceller
el=$(since_cancel "$pid")
within "$TIMED_OUT" "ERROR:  57014" "$el" 1000 "pg_cancel_backend ends a 60 s wait_ms within a second (${el:-?} ms)"
redis del "$(key held lock)" >/dev/null
session_close s
finish
