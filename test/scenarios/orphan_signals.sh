#!/usr/bin/env bash
# orphan_signals.sh -- a reload or a stop sent to the background worker while
# it asks Redis to release orphaned leases is acted on, not slept through.
#
# The worker sets ShutdownRequestPending or ConfigReloadPending and its latch
# in the signal handler, and looks at the flags at the top of its loop.  The
# wait inside each Redis exchange (conn.c's rp_wait) resets that latch: a
# signal that lands during a release of the drain, when the drain then empties
# the queue and no election runs, used to leave the worker asleep (WaitLatch
# with no timeout) with the flag set.  A stop then never ended it: the
# postmaster waits for it at a fast shutdown, and `pg_ctl stop` hung.  A
# reload was not applied until the next hand-off.
#
# As in orphan_wakeup.sh, two clients keep Redis busy with 100 ms scripts; a
# backend pointed at a dead port exits with 10 leases, which the worker then
# releases one wait after another.  The signal is sent inside that drain.
# The worker before the fix (the naive twin) fails both checks.
source "$(dirname "$0")/tap.bash"
source "$(dirname "$0")/../../scripts/lib.sh"
plan 4

dead=$(rp_free_port)
held() {  # prefix: how many of its leases Redis holds
	redis eval "return #redis.call('keys', 'rp:{' .. ARGV[1] .. '-*}:lock')" 0 "$1"
}
worker() { pgrep -P "$(head -1 "$RP_TMP/pg/postmaster.pid")" -f 'redis_primitives elector'; }
spin="redis.call('incr', KEYS[1])
local t0 = redis.call('time')
repeat local t = redis.call('time') until (t[1] - t0[1]) * 1000000 + t[2] - t0[2] > 100000"
# orphans NAME: a backend hands 10 leases to the worker while Redis is busy;
# returns once they are queued (the backend has exited) and spinners run.
orphans() {
	psql -X -At -q -d "$RP_DB" -c "SET application_name = '$1'" \
	   -c "SELECT count(rp_acquire('$1-' || i, 60000)) FROM generate_series(1, 10) i" \
	   -c "SET redis_primitives.port = $dead" -c "SELECT pg_sleep(600)" >/dev/null 2>&1 &
	wait_for 30 "[ \"\$(held $1)\" = 10 ] && [ -n \"\$(q \"SELECT 1 FROM pg_stat_activity WHERE application_name = '$1' AND query LIKE '%pg_sleep%'\")\" ]" ||
		return 1
	local b; b=$(q "SELECT pid FROM pg_stat_activity WHERE application_name = '$1' AND query LIKE '%pg_sleep%'")
	redis-cli -p "$REDIS_PORT" -r 60 eval "$spin" 1 "$1-spin" >/dev/null & busy=$!
	redis-cli -p "$REDIS_PORT" -r 60 eval "$spin" 1 "$1-spin" >/dev/null & busy+=" $!"
	wait_for 30 "[ \"\$(redis get $1-spin)\" -ge 4 ]" || return 1
	kill -TERM "$b" || return 1
	while kill -0 "$b" 2>/dev/null; do sleep 0.01; done
}
cleanup() {  # NAME
	kill $busy 2>/dev/null; wait
	redis eval "for _, k in ipairs(redis.call('keys', 'rp:{' .. ARGV[1] .. '-*')) do redis.call('del', k) end" 0 "$1" >/dev/null
	redis del "$1-spin" >/dev/null
}

# A stop: the worker must exit, and the postmaster start a new one.
old=$(worker)
[ -n "$old" ] && orphans sigterm; ok $? "10 leases handed to the worker (pid $old) while Redis is busy"
sleep 0.3
kill -TERM "$old"
sleep 1; kill $busy 2>/dev/null
t0=$(now_ms)
wait_for 20 "[ -n \"$old\" ] && ! kill -0 \"$old\" 2>/dev/null"
ok $? "SIGTERM sent while the worker releases them: it exits ($(( $(now_ms) - t0 )) ms after Redis is idle again; leases left: $(held sigterm))"
cleanup sigterm
wait_for 30 "[ -n \"\$(worker)\" ] && [ \"\$(worker)\" != $old ]"

# A reload: the election it adds must run.
[ -n "$(worker)" ] && orphans sighup; ok $? "10 leases handed to the worker (pid $(worker)) while Redis is busy"
sleep 0.3
q "ALTER SYSTEM SET redis_primitives.elections = 'sighup_added'" "SELECT pg_reload_conf()" >/dev/null
sleep 1; kill $busy 2>/dev/null
t0=$(now_ms)
wait_for 20 "[ -n \"\$(q \"SELECT 1 FROM rp_elections() WHERE name = 'sighup_added'\")\" ]"
ok $? "a reload sent while the worker releases them is applied ($(( $(now_ms) - t0 )) ms after Redis is idle again; leases left: $(held sighup))"
q "ALTER SYSTEM RESET redis_primitives.elections" "SELECT pg_reload_conf()" >/dev/null
wait_for 30 "[ -z \"\$(q \"SELECT 1 FROM rp_elections()\")\" ]"
cleanup sighup
finish
