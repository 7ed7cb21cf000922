#!/usr/bin/env bash
# test/timing/semaphore.sh -- how soon a semaphore wait ends.
# test/scenarios/semaphore.sh asserts that permits of hung holders come
# back at their TTL and not before it, and that statement_timeout and
# pg_cancel_backend end a wait with 57014; this file bounds how late.  Each
# call is timed by the server, in the waiting session.
source "$(dirname "$0")/../scenarios/tap.bash"
plan 3
PERMITS=5 TTL=3000

# 1. Permits whose holders do not release them (sessions that hold them and
# sleep) come back once their TTL ends: shortened to TTL with
# rp_extend(name, token, ttl_ms), a waiting newcomer gets one within 5 s
# of it.
q "DROP TABLE IF EXISTS sem_held" "CREATE TABLE sem_held (pid int, token text)" >/dev/null
for i in $(seq $PERMITS); do
	q "SET application_name = 'sem-held'" \
	  "INSERT INTO sem_held SELECT pg_backend_pid(), (rp_semaphore_acquire('held', $PERMITS, 600000)).token" \
	  "SELECT pg_sleep(600)" >/dev/null 2>&1 &
done
wait_for 60 '[ "$(q "SELECT count(token) FROM sem_held")" = $PERMITS ]' || diag "fewer than $PERMITS holders took a permit in 60 s"
session_open nc
session_timed nc "SELECT count(*) FROM sem_held WHERE (rp_extend('held', token, $TTL)).token IS NOT NULL; SELECT (rp_semaphore_acquire('held', $PERMITS, 10000, 30000)).fence IS NOT NULL"
session_close nc
within "$(echo $TIMED_OUT)" "$PERMITS t" "$TIMED_MS" $((TTL + 5000)) \
	"a waiting newcomer gets a permit no later than 5 s past the TTL of the holders' permits (${TIMED_MS:-?} ms, TTL $TTL ms)"
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'sem-held'" >/dev/null
wait

# 2. statement_timeout (700 ms) ends a wait for a permit long before its
# wait_ms (60 s).
session_open h
session_q h "SELECT (rp_semaphore_acquire('gate', 1, 600000)).fence IS NOT NULL" >/dev/null   # held until released below
session_open w
session_timed w "SET statement_timeout = 700; SELECT rp_semaphore_acquire('gate', 1, 30000, 60000); RESET statement_timeout"
within "$(echo "$TIMED_OUT" | sed -n 's/^\(ERROR:  *[0-9A-Z]\{5\}\).*$/\1/p')" "ERROR:  57014" "$TIMED_MS" 5000 \
	"statement_timeout ends a wait for a permit well before wait_ms (${TIMED_MS:-?} ms)"

# 3. pg_cancel_backend ends a wait: the waiter is cancelled once it is
# seen waiting (wait_event LeaseWait) in the call; the time runs from
# just before the cancel to the waiter's next statement.
wpid=$(session_pid w)
printf '%s\n' "SELECT rp_semaphore_acquire('gate', 1, 30000, 60000);" "SELECT 'T1 ' || $ms_sql;" >&"$_fd_w"
waiting="SELECT count(*) FROM pg_stat_activity WHERE pid = $wpid AND wait_event = '$(wait_event LeaseWait)' AND query LIKE '%rp_semaphore_acquire(%'"
t_cancel=
wait_for 30 '[ "$(q "$waiting")" = 1 ]' && t_cancel=$(q "SELECT $ms_sql" "SELECT pg_cancel_backend($wpid)" | head -1)
out=$(session_q w "SELECT 1")
t1=$(echo "$out" | sed -n 's/^T1 //p')
elapsed=; [ -n "$t_cancel" ] && [ -n "$t1" ] && elapsed=$((t1 - t_cancel))   # empty: the check fails
within "$(echo "$out" | grep -o '^ERROR:  57014' | head -1)" "ERROR:  57014" "$elapsed" 3000 \
	"pg_cancel_backend ends a wait within 3 s (${elapsed:-?} ms$([ -n "$t_cancel" ] || echo ': the waiter was never seen waiting'))"
session_close w
session_q h "SELECT rp_release_all()" >/dev/null
session_close h
q "DROP TABLE sem_held" >/dev/null
finish
