#!/usr/bin/env bash
# Mutual exclusion under real concurrency: 40 separate connections call
# rp_acquire on one name at the same instant, 15 rounds.  Exactly one winner
# each round; fence tokens strictly increase across all rounds.  The naive
# twin (GET, then SET when absent: check-then-act in two round trips, with a
# 50 ms pause between them standing in for a slow network or a GC pause) lets
# several callers in at once under the same barrier.
source "$(dirname "$0")/tap.bash"
plan 33
N=40 ROUNDS=15

round() {  # name sql-for-one-caller -> prints the winners' outputs
	local name=$1 sql=$2 i
	barrier_hold 7001 || return 1
	barrier_hold 7002 || return 1
	for i in $(seq $N); do
		q "SELECT pg_advisory_lock_shared(7001)" "$sql" \
		  "SELECT pg_advisory_lock_shared(7002)" "SELECT rp_release_all()" \
		  > "$RP_TMP/caller.$i" 2>&1 &
	done
	barrier_wait 7001 $N || return 1
	barrier_release 7001
	# every caller has made its attempt once it waits on the second barrier
	barrier_wait 7002 $N || return 1
	barrier_release 7002
	wait
	for i in $(seq $N); do sed -n 2p "$RP_TMP/caller.$i"; done
}

last=0
for r in $(seq $ROUNDS); do
	out=$(round race "SELECT coalesce((rp_acquire('race', 30000)).fence::text, 'none')")
	winners=$(echo "$out" | grep -cv '^none$')
	nones=$(echo "$out" | grep -c '^none$')
	fence=$(echo "$out" | grep -v '^none$' | head -1)
	is "$winners/$nones" "1/$((N - 1))" "round $r: exactly one of $N concurrent callers acquires"
	cmp_ok "${fence:-0}" -gt "$last" "round $r: fence $fence is above the previous round's $last"
	last=${fence:-$last}
done
is "$(q "SELECT held FROM rp_lock_info('race')")" "f" "every winner released its lease"

# The naive lock: GET, and SET if nothing is there, as two commands.
redis del naive:race >/dev/null
out=$(round naive "SELECT CASE WHEN rp_test.redis('GET', 'naive:race') = '' AND pg_sleep(0.05) IS NOT NULL THEN rp_test.redis('SET', 'naive:race', pg_backend_pid()::text) ELSE 'none' END")
# A winner is a caller whose SET was answered OK; an error is nobody's win.
winners=$(echo "$out" | grep -c '^OK$')
diag "naive check-then-set: $winners of $N callers believed they held the lock ($(echo "$out" | grep -c '^none$') saw it taken)"
cmp_ok "$winners" -gt 1 "the naive check-then-set lock admits more than one holder"

# The same 40 callers with wait_ms: each eventually gets the lock, one at a
# time, and the tokens they were given are all distinct.
barrier_hold 7003
for i in $(seq 10); do
	q "SELECT pg_advisory_lock_shared(7003)" \
	  "SELECT (rp_acquire('queue', 30000, 20000)).fence" "SELECT pg_sleep(0.02)" "SELECT rp_release('queue')" \
	  > "$RP_TMP/waiter.$i" 2>&1 &
done
barrier_wait 7003 10; barrier_release 7003; wait
fences=$(for i in $(seq 10); do sed -n 2p "$RP_TMP/waiter.$i"; done | sort -n | uniq | grep -c '^[0-9]')
is "$fences" "10" "10 waiters with wait_ms each acquire in turn, with 10 distinct tokens"
finish
