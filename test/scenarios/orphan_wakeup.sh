#!/usr/bin/env bash
# orphan_wakeup.sh -- a lease handed to the background worker while it is
# asking Redis to release an earlier one is released too (mutant 83).
#
# The worker copies its queue, then asks Redis entry by entry; the wait
# inside each exchange resets its latch.  A backend whose hand-off landed
# during that wait had its wakeup consumed: the worker released its copy,
# saw nothing left, and slept until the next hand-off, so the new lease was
# held for its whole TTL.  (This was orphan_worker.sh's flake: "the worker
# releases the lease within 30 s" failed in 4 of 11 CI runs, whenever the
# test unpaused Redis within half a second of the last hand-off.)
#
# Each trial: two clients keep Redis busy with scripts of 100 ms each, one
# after the other, so every other client's command waits up to 200 ms or so
# (the worker gives one try 500 ms).  Backend A holds 10 leases and B
# one; their sessions point at a port where nothing listens, so each one's
# own exit release fails at once and it hands its leases off to the worker.
# A exits: the worker copies the queue and releases entry by entry, each
# release waiting for the script in progress.  B exits right after, so its
# hand-off lands during one of those waits, which consumes its wakeup.  The
# fixed worker releases B right after its copy; the worker before the fix
# (mutant 83, the naive twin) slept and left B (or A's entries handed off
# after its copy) held for their TTL.  (A hand-off that lands between two
# waits cannot see the bug, but must pass: three trials.)
source "$(dirname "$0")/tap.bash"
source "$(dirname "$0")/../../scripts/lib.sh"
plan 3

dead=$(rp_free_port)
held() {  # prefix: how many of its leases Redis holds
	redis eval "return #redis.call('keys', 'rp:{' .. ARGV[1] .. '-*}:lock')" 0 "$1"
}
hold() {  # name n: a backend that takes n 60 s leases, points at a dead port, then sleeps
	psql -X -At -q -d "$RP_DB" -c "SET application_name = '$1'" \
	   -c "SELECT count(rp_acquire('$1-' || i, 60000)) FROM generate_series(1, $2) i" \
	   -c "SET redis_primitives.port = $dead" -c "SELECT pg_sleep(600)" >/dev/null 2>&1 &
}
pid() { q "SELECT pid FROM pg_stat_activity WHERE application_name = '$1' AND query LIKE '%pg_sleep%'"; }
# end PID: terminate that backend and return once it has exited (its exit
# callback, and so its hand-off, has run).
end() {
	kill -TERM "$1" || return 1
	while kill -0 "$1" 2>/dev/null; do :; done
}
spin="redis.call('incr', KEYS[1])
local t0 = redis.call('time')
repeat local t = redis.call('time') until (t[1] - t0[1]) * 1000000 + t[2] - t0[2] > 100000"

for t in 1 2 3; do
	hold wa$t 10; hold wb$t 1
	wait_for 30 "[ -n \"\$(pid wa$t)\" ] && [ -n \"\$(pid wb$t)\" ]"
	a=$(pid wa$t) b=$(pid wb$t)
	# redis-cli itself in the background, not the redis function (a
	# subshell, whose kill would leave redis-cli spinning).
	redis-cli -p "$REDIS_PORT" -r 100 eval "$spin" 1 wspin$t >/dev/null & busy=$!
	redis-cli -p "$REDIS_PORT" -r 100 eval "$spin" 1 wspin$t >/dev/null & busy+=" $!"
	wait_for 30 "[ \"\$(redis get wspin$t)\" -ge 4 ]"
	# Held before the exits, or "released" below would be vacuous.
	before="$(held wa$t) and $(held wb$t)"
	end "$a"
	end "$b"
	sleep 1
	kill $busy 2>/dev/null
	t0=$(now_ms)
	[ "$before" = "10 and 1" ] && wait_for 20 "[ \$(held wa$t) = 0 ] && [ \$(held wb$t) = 0 ]"
	ok $? "trial $t: while Redis is busy, a backend with 10 leases exits, then one with 1; the worker releases all 11 ($(( $(now_ms) - t0 )) ms after Redis is idle again; held before: $before; left: $(held wa$t) and $(held wb$t))"
	wait
	redis eval "for _, k in ipairs(redis.call('keys', 'rp:{w[ab]$t-*')) do redis.call('del', k) end" 0 >/dev/null
	redis del wspin$t >/dev/null
done
finish
