#!/usr/bin/env bash
# orphan_wakeup.sh -- what reaches the background worker while it asks Redis
# to release orphaned leases is acted on: a backend's hand-off (mutant 83),
# a reload or a stop (mutant 84).
#
# The worker copies its queue, then asks Redis entry by entry; the wait
# inside each exchange (transport.c's rp_wait) resets its latch.  A hand-off that
# landed during that wait had its wakeup consumed: the worker released its
# copy, saw nothing left, and slept until the next hand-off, so the new
# lease was held for its whole TTL.  (This was orphan_worker.sh's flake:
# "the worker releases the lease within 30 s" failed in 4 of 11 CI runs.)
# A SIGHUP or SIGTERM in that wait was slept through the same way (flags
# looked at only at the loop top): a stop never ended the worker, and the
# postmaster waits for it at a fast shutdown; a reload was not applied.
#
# How an event is put inside such a wait: two clients keep Redis busy with
# DEBUG SLEEP 0.1 (its main thread stops for 100 ms), each sending the next
# as soon as the last returned, so every other client's command waits up to
# 200 ms or so (the worker gives one try 500 ms).  Not a Lua script that
# spins until TIME has moved 100 ms: on Valkey TIME stands still inside a
# script (it is the command's start time), so the script never ended and
# every other command was refused with BUSY.  A
# backend whose session points at a port where nothing listens exits with
# 10 leases: its own exit release fails at once, it hands them off, and the
# worker releases them one wait after another.  The event is sent then.
# Whether it lands inside a wait rather than between two depends on timing
# (most trials do): the worker before the fixes (the naive twins, mutants 83
# and 84) fails some trial in every run; the fixed worker passes them all.
# The leases are 600 s long and each check waits 120 s: a lease the worker
# slept through lives out its TTL, an exit that never comes never comes,
# and a busy machine delays neither past the wait.
source "$(dirname "$0")/tap.bash"
source "$(dirname "$0")/../../scripts/lib.sh"
plan 7

dead=$(rp_free_port)
held() {  # prefix: how many of its leases Redis holds
	redis eval "return #redis.call('keys', 'rp:{' .. ARGV[1] .. '-*}:lock')" 0 "$1"
}
hold() {  # name n: a backend that takes n 600 s leases, points at a dead port, then sleeps
	psql -X -At -q -d "$RP_DB" -c "SET application_name = '$1'" \
	   -c "SELECT count(rp_acquire('$1-' || i, 600000)) FROM generate_series(1, $2) i" \
	   -c "SET redis_primitives.port = $dead" -c "SELECT pg_sleep(600)" >/dev/null 2>&1 &
}
pid() { q "SELECT pid FROM pg_stat_activity WHERE application_name = '$1' AND query LIKE '%pg_sleep%'"; }
# end PID: terminate that backend and return once it has exited (its exit
# callback, and so its hand-off, has run).
end() {
	kill -TERM "$1" || return 1
	while kill -0 "$1" 2>/dev/null; do :; done
}
# sleeps: how many DEBUG SLEEPs Redis has run (INFO commandstats).
sleeps() { redis info commandstats | tr -d '\r' | sed -n 's/^cmdstat_debug:calls=\([0-9]*\),.*/\1/p' | grep . || echo 0; }
# busy: two sleeping clients, running once they have slept four times.
# redis-cli itself in the background, not the redis function (a subshell,
# whose kill would leave redis-cli sending).
busy() {
	local before; before=$(sleeps)
	redis-cli -p "$REDIS_PORT" -r 100 debug sleep 0.1 >/dev/null & busy=$!
	redis-cli -p "$REDIS_PORT" -r 100 debug sleep 0.1 >/dev/null & busy+=" $!"
	wait_for 30 "[ \$(( \$(sleeps) - $before )) -ge 4 ]"
}
# idle PREFIX...: stop the sleepers, forget the names' keys.
idle() {
	kill $busy 2>/dev/null
	wait
	for p in "$@"; do
		redis eval "for _, k in ipairs(redis.call('keys', ARGV[1] .. '*')) do redis.call('del', k) end" 0 "rp:{$p-" >/dev/null
	done
}

# ---- a hand-off during a drain -------------------------------------------
# Backend A holds 10 leases and B one; A exits, then B, whose hand-off lands
# in a wait of the drain of A's.
for t in 1 2 3; do
	hold wa$t 10; hold wb$t 1
	wait_for 30 "[ -n \"\$(pid wa$t)\" ] && [ -n \"\$(pid wb$t)\" ]"
	a=$(pid wa$t) b=$(pid wb$t)
	busy
	# Held before the exits, or "released" below would be vacuous.
	before="$(held wa$t) and $(held wb$t)"
	end "$a"
	end "$b"
	sleep 1
	kill $busy 2>/dev/null
	t0=$(now_ms)
	[ "$before" = "10 and 1" ] && wait_for 120 "[ \$(held wa$t) = 0 ] && [ \$(held wb$t) = 0 ]"
	ok $? "trial $t: while Redis is busy, a backend with 10 leases exits, then one with 1; the worker releases all 11 ($(( $(now_ms) - t0 )) ms after Redis is idle again; held before: $before; left: $(held wa$t) and $(held wb$t))"
	idle wa$t wb$t
done

# ---- a stop or a reload during a drain -------------------------------------
# orphans NAME: a backend hands 10 leases to the worker while Redis is busy;
# returns once they are queued (the backend has exited).
orphans() {
	hold "$1" 10
	wait_for 30 "[ \"\$(held $1)\" = 10 ] && [ -n \"\$(pid $1)\" ]" || return 1
	local b; b=$(pid "$1")
	busy || return 1
	end "$b"
}

# A stop: the worker must exit, and the postmaster start a new one.
old=$(elector_pids)
[ -n "$old" ] && orphans sigterm; ok $? "10 leases handed to the worker (pid $old) while Redis is busy"
sleep 0.3
kill -TERM "$old"
sleep 1; kill $busy 2>/dev/null
t0=$(now_ms)
wait_for 120 "[ -n \"$old\" ] && ! kill -0 \"$old\" 2>/dev/null"
ok $? "SIGTERM sent while the worker releases them: it exits ($(( $(now_ms) - t0 )) ms after Redis is idle again; leases left: $(held sigterm))"
idle sigterm
wait_for 30 "[ -n \"\$(elector_pids)\" ] && [ \"\$(elector_pids)\" != $old ]"

# A reload: the election it adds must run.
[ -n "$(elector_pids)" ] && orphans sighup; ok $? "10 leases handed to the worker (pid $(elector_pids)) while Redis is busy"
sleep 0.3
q "ALTER SYSTEM SET redis_primitives.elections = 'sighup_added'" "SELECT pg_reload_conf()" >/dev/null
sleep 1; kill $busy 2>/dev/null
t0=$(now_ms)
wait_for 120 "[ -n \"\$(q \"SELECT 1 FROM rp_elections() WHERE name = 'sighup_added'\")\" ]"
ok $? "a reload sent while the worker releases them is applied ($(( $(now_ms) - t0 )) ms after Redis is idle again; leases left: $(held sighup))"
q "ALTER SYSTEM RESET redis_primitives.elections" "SELECT pg_reload_conf()" >/dev/null
wait_for 30 "[ -z \"\$(q \"SELECT 1 FROM rp_elections()\")\" ]"
idle sighup
finish
