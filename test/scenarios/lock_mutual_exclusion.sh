#!/usr/bin/env bash
# Mutual exclusion under real concurrency: 40 separate connections call
# rp_acquire on one name at the same instant, 15 rounds.  Exactly one winner
# each round; fence tokens strictly increase across all rounds.  The naive
# twin (GET, then SET when absent: check-then-act in two round trips, with a
# 50 ms pause between them standing in for a slow network or a GC pause) lets
# several callers in at once under the same barrier.
#
# The callers are race.py's: 40 connections of one client process, released
# together by an advisory-lock barrier each round, kept from round to round.
source "$(dirname "$0")/tap.bash"
plan 33
N=40 ROUNDS=15
race() { /usr/bin/python3 "$(dirname "$0")/race.py" "$@"; }

# Each round, every caller tries once; once all have tried, each releases
# what it holds (--after), so the next round starts from a free name.  The
# winner's lease (10 min) outlasts any stall of a loaded machine: it is held
# until --after releases it, never until a TTL ends mid-round.
race -n $N -r $ROUNDS -k 7000 --after "SELECT rp_release_all()" \
	"SELECT coalesce((rp_acquire('race', 600000)).fence::text, 'none')" >"$RP_TMP/race.out"
grep '^#' "$RP_TMP/race.out"
last=0
for r in $(seq $ROUNDS); do
	out=$(awk -v r="$r" '$1 == r && $3 != "DONE" { print $3 }' "$RP_TMP/race.out")
	winners=$(echo "$out" | grep -c '^[0-9][0-9]*$')
	nones=$(echo "$out" | grep -c '^none$')
	fence=$(echo "$out" | grep '^[0-9][0-9]*$' | head -1)
	is "$winners/$nones" "1/$((N - 1))" "round $r: exactly one of $N concurrent callers acquires"
	cmp_ok "${fence:-0}" -gt "$last" "round $r: fence $fence is above the previous round's $last"
	last=${fence:-$last}
done
is "$(q "SELECT held FROM rp_lock_info('race')")" "f" "every winner released its lease"

# The naive lock: GET, and SET if nothing is there, as two commands.
# A winner is a caller whose SET was answered OK; an error is nobody's win.
redis del naive:race >/dev/null
race -n $N -k 7100 \
	"SELECT CASE WHEN rp_test.redis('GET', 'naive:race') = '' AND pg_sleep(0.05) IS NOT NULL THEN rp_test.redis('SET', 'naive:race', pg_backend_pid()::text) ELSE 'none' END" \
	>"$RP_TMP/naive.out"
winners=$(grep -c '^1 [0-9]* OK$' "$RP_TMP/naive.out")
diag "naive check-then-set: $winners of $N callers believed they held the lock ($(grep -c ' none$' "$RP_TMP/naive.out") saw it taken, $(grep -c ' ERROR ' "$RP_TMP/naive.out") errors)"
cmp_ok "$winners" -gt 1 "the naive check-then-set lock admits more than one holder"

# 10 callers with wait_ms: each eventually gets the lock, one at a time, and
# the tokens they were given are all distinct.
race -n 10 -k 7200 "SELECT (rp_acquire('queue', 30000, 120000)).fence" "SELECT pg_sleep(0.02)" \
	"SELECT rp_release('queue')" >"$RP_TMP/waiter.out"
fences=$(awk '$3 ~ /^[0-9]+$/ && $3 != "" { print $3 }' "$RP_TMP/waiter.out" | sort -n | uniq | wc -l)
fences_t=$(grep -c '^1 [0-9]* t$' "$RP_TMP/waiter.out")
is "$fences/$fences_t" "10/10" "10 waiters with wait_ms each acquire in turn, with 10 distinct tokens, and release"
finish
