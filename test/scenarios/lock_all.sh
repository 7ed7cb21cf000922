#!/usr/bin/env bash
# test/scenarios/lock_all.sh -- rp_acquire_all across sessions (docs/lock.md,
# "Many locks at once").
#
# The failure it exists to prevent: two workers that each need the same two
# locks take them one at a time in different orders.  Each gets its first,
# then waits for the other's: a deadlock that lasts until wait_ms runs out
# (and, with no wait_ms, a subset held while the other fails).  rp_acquire_all
# takes all or nothing in one script, and a waiting call holds nothing, so
# the two always both get through.  Also: one round trip to take ten names
# and one to release them (Redis' own INFO commandstats, on a Redis of this
# test's own), a cancel during the wait leaves nothing held, and a backend
# terminated after the script was sent leaves none of its names held.
source "$(dirname "$0")/tap.bash"
source "$(dirname "$0")/../../scripts/lib.sh"

plan 16

own_redis

# --- One round trip for ten names, one to release them ---------------------
q "SELECT rp_acquire_all(ARRAY['warm'], 1000)" "SELECT rp_release_all()" >/dev/null  # scripts cached
b0=$(round_trips)
q "SELECT array_length(rp_acquire_all(ARRAY(SELECT 'ten-' || g FROM generate_series(1, 10) g), 10000), 1)" \
	"SELECT rp_release_all()" > "$RP_TMP/la.out"
b1=$(round_trips)
is "$(sed -n 1p "$RP_TMP/la.out")" "10" "rp_acquire_all of ten names returns ten leases"
is "$(sed -n 2p "$RP_TMP/la.out")" "10" "rp_release_all releases the ten"
is "$(( b1 - b0 ))" "2" "two Redis round trips in all: one to take ten names, one to release them"

# --- Opposite orders ---------------------------------------------------------
# Each worker: take two locks, hold them 300 ms, release.  Worker A asks for
# x then y, worker B for y then x, started together (an advisory-lock
# barrier).  The naive twin takes them one by one with rp_acquire(wait_ms),
# and between the two waits until it SEES the other worker hold its first
# name (our second) -- not a sleep: a worker descheduled for longer than a
# fixed pause would start after the other had taken and released both, and
# the naive pair would pass by luck.  Once each holds one, each waits for
# the other's, which is released only after that wait failed: a worker
# fails every time (the 60 s TTL never ends within the 1.5 s waits).
worker() {  # barrier naive(0|1) first second
	local sql
	if [ "$2" = 1 ]; then
		sql="SELECT rp_acquire('$3', 60000, 1500) IS NOT NULL AS a \\gset
SELECT EXISTS (SELECT FROM generate_series(1, 1200) i
               WHERE (SELECT (rp_lock_info('$4')).held FROM pg_sleep(CASE WHEN i = 1 THEN 0 ELSE 0.05 END))) AS seen \\gset
SELECT rp_acquire('$4', 60000, 1500) IS NOT NULL AS b \\gset
SELECT CASE WHEN NOT :'seen' THEN 'unseen' WHEN :'a' AND :'b' THEN 'both' ELSE 'stuck' END;"
	else
		sql="SELECT CASE WHEN rp_acquire_all(ARRAY['$3', '$4'], 60000, 20000) IS NOT NULL THEN 'both' ELSE 'stuck' END;
SELECT pg_sleep(0.3) \\g /dev/null"
	fi
	psql -X -At -q -d "$RP_DB" -c "SELECT pg_advisory_lock_shared($1)" -f <(echo "$sql") \
		-c "SELECT rp_release_all()" 2>&1 | sed -n 's/^\(both\|stuck\|unseen\)$/\1/p'
}
race() {  # naive
	local key=$((7100 + $1)) pa pb
	barrier_hold $key
	worker $key "$1" "ord-x-$1" "ord-y-$1" > "$RP_TMP/la.a" & pa=$!
	worker $key "$1" "ord-y-$1" "ord-x-$1" > "$RP_TMP/la.b" & pb=$!
	barrier_release $key 2
	wait $pa $pb
	echo "$(cat "$RP_TMP/la.a") $(cat "$RP_TMP/la.b")"
}
naive=$(race 1)
diag "naive: $naive"
r=1; case $naive in *unseen*) ;; *stuck*) r=0 ;; esac
ok $r "naive: one lock at a time in opposite orders, each holds one and waits for the other: a worker fails when wait_ms ends"
is "$(race 0)" "both both" "rp_acquire_all in opposite orders: both workers get both locks"

# --- A waiting call holds nothing ------------------------------------------
# Another client holds w-2 until we let go of it; a session waits for
# [w-1, w-2]; once it has tried and is sleeping between tries (wait_event
# LeaseWait), w-1 must be free; once w-2 is deleted the waiter takes both.
# No clock decides the order: on a loaded machine a hold with a TTL could
# end before the check, and the waiter's rightful w-1 would read as held.
rc SET "rp:{w-2}:lock" other PX 60000 >/dev/null
psql -X -At -q -d "$RP_DB" -c "SELECT array_length(rp_acquire_all(ARRAY['w-1', 'w-2'], 10000, 30000), 1)" \
	> "$RP_TMP/la.w" 2>&1 &
pw=$!
waiting="SELECT count(*) FROM pg_stat_activity WHERE wait_event = '$(wait_event LeaseWait)' AND query LIKE '%rp_acquire_all(ARRAY[''w-1''%'"
held_mid="never seen waiting"
wait_for 30 '[ "$(q "$waiting")" = 1 ]' && held_mid=$(rc EXISTS "rp:{w-1}:lock")
rc DEL "rp:{w-2}:lock" >/dev/null
wait $pw
is "$held_mid" "0" "while it waits for w-2, the caller does not hold w-1"
is "$(cat "$RP_TMP/la.w")" "2" "and takes both once w-2 is released"
q "SELECT rp_release('w-1')" >/dev/null 2>&1; rc DEL "rp:{w-1}:lock" "rp:{w-2}:lock" >/dev/null

# --- Cancelled while waiting: nothing left ---------------------------------
rc SET "rp:{c-2}:lock" other PX 60000 >/dev/null
state=$(psql -X -At -q -d "$RP_DB" -v VERBOSITY=sqlstate -c "SET statement_timeout = 400" \
	-c "SELECT rp_acquire_all(ARRAY['c-1', 'c-2'], 10000, 30000)" 2>&1 | sed -n 's/^ERROR:  *\([0-9A-Z]\{5\}\).*/\1/p')
is "$state" "57014" "statement_timeout ends the wait (57014)"
is "$(rc EXISTS "rp:{c-1}:lock")" "0" "and nothing is left held"

# --- Terminated after the script was sent: no name is stranded --------------
# The session is connected, then Redis is stopped (SIGSTOP) until the test
# lets it go on; rp_acquire_all of three names with a 600 s TTL is sent and
# seen waiting for its answer (wait_event Extension); the backend is
# terminated; Redis goes on (SIGCONT) and runs the script, granting three
# leases whose tokens only the dead backend knew.  Every name was recorded
# before sending, so the exit (or the background worker it hands them to)
# releases all three within seconds.  No clock orders the steps: a Redis
# asleep for a fixed time could wake before a slow test looked.
session_open t
session_q t "SET redis_primitives.command_timeout = '60s'" >/dev/null
session_q t "SELECT (rp_lock_info('tm-1')).held" >/dev/null
terminate_mid_call "$RPORT" t "SELECT rp_acquire_all(ARRAY['tm-1', 'tm-2', 'tm-3'], 600000);" '%rp_acquire_all(%'
is "$waited" "active $(wait_event Reply)" "rp_acquire_all waits on the sleeping Redis when its backend is terminated"
session_close t
wait_for 30 '[ "$(rc GET "rp:{tm-3}:fence")" = 1 ]'
is "$(rc MGET "rp:{tm-1}:fence" "rp:{tm-2}:fence" "rp:{tm-3}:fence" | tr '\n' ' ')" "1 1 1 " \
	"Redis ran the script on waking: three real leases (fence 1 each)"
# The worker takes a second or two on a loaded machine; 60 s is still ten
# times less than the TTL a stranded lease would live.
wait_for 60 '[ "$(rc EXISTS "rp:{tm-1}:lock" "rp:{tm-2}:lock" "rp:{tm-3}:lock")" = 0 ]'
ok $? "all three are released within seconds, not left for 600 s ($(( $(now_ms) - t )) ms)"
rc SET naive:tm tok NX PX 600000 >/dev/null
cmp_ok "$(rc PTTL naive:tm)" -gt 500000 "naive twin: a SET NX PX whose client died keeps its key for the whole TTL"

# --- Redis Cluster: the names must share a hash slot -----------------------
# One node serving every slot is a whole cluster: enough to see the check.
CPORT=$(rp_free_port)
rp_start_redis "$CPORT" --cluster-enabled yes --cluster-config-file "nodes-$CPORT.conf" >/dev/null
trap 'rp_stop_redis "$RPORT"; rp_stop_redis "$CPORT"' EXIT
redis-cli -p "$CPORT" CLUSTER ADDSLOTSRANGE 0 16383 >/dev/null
wait_for 30 '[ "$(redis-cli -p $CPORT CLUSTER INFO | tr -d "\r" | sed -n "s/^cluster_state://p")" = ok ]'
cl() { PGOPTIONS="-c redis_primitives.port=$CPORT -c redis_primitives.cluster=on" \
	psql -X -At -q -d "$RP_DB" -v VERBOSITY=verbose "$@" 2>&1; }
out=$(cl -c "SELECT rp_acquire_all(ARRAY['order-1', 'order-2'], 10000)")
is "$(echo "$out" | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\):.*/\1/p')" "22023" \
	"Cluster mode: names in different slots fail at once with 22023"
cmp_ok "$(echo "$out" | grep -c "HINT:.*order-42}:items")" -eq 1 "with a hint on how to share a slot"
is "$(cl -c "SELECT array_length(rp_acquire_all(ARRAY['order-42}:items', 'order-42}:payment'], 10000), 1)" -c "SELECT rp_release_all()" | tr '\n' ' ')" \
	"2 2 " "names with a common beginning ending in '}' share a slot: taken and released"

finish
