#!/usr/bin/env bash
# The semaphore under real concurrency and real failures.
#
#  1. 40 separate sessions race for 5 permits, 5 rounds (15 with
#     RP_SEMAPHORE_LONG=1, `make test-semaphore-long`): exactly 5 winners
#     each round (from the holders' own records, and sampled from Redis while
#     they hold), fences unique and increasing from round to round.
#  2. 20 sessions (40 long) that wait for a permit, hold it and release it:
#     the holders' own timestamps never show more than 5 at once.
#  3. Holders that die: a naive INCR/DECR counting semaphore (as a user
#     writes it) leaks its permits for good; our permits of hung (SIGSTOPped)
#     backends come back at their TTL, not before, and those of terminated
#     backends at once (exit release).
#  4. cancel and statement_timeout end a wait; the dead waiters' places lapse.
#     (How soon in 3 and 4: test/timing/semaphore.sh.)
#  5. Fairness: an early waiter gets the next free permit although 8
#     newcomers queued behind it hammer the semaphore meanwhile.
# The default run keeps every check and its margins and takes ~30 s on an
# idle machine; the long run only repeats the races more often.
#  6. rp_semaphore_acquire_xact releases at COMMIT and ROLLBACK.
#  7. A wait ended by an error Redis answered leaves the queue at the abort.
source "$(dirname "$0")/tap.bash"
plan 28
N=40 PERMITS=5
if [ -n "${RP_SEMAPHORE_LONG:-}" ]; then ROUNDS=15 NCHURN=40; else ROUNDS=5 NCHURN=20; fi

info() { q "SELECT $2 FROM rp_semaphore_info('$1')"; }
_lap=$(now_ms)
lap() { local t; t=$(now_ms); diag "$1: $((t - _lap)) ms"; _lap=$t; }   # where the time goes

# ---- 1. the race ---------------------------------------------------------
# One barrier session holds an exclusive advisory lock per round and phase;
# each caller runs all rounds in one session: wait at A(r), acquire, record,
# wait at B(r) (everyone now holds what they won), release.  The barrier
# session drives the rounds in one DO block: it opens A(r) once all N wait
# there, and once all N wait at B(r) it samples Redis, then opens B(r).
q "DROP TABLE IF EXISTS sem_round, sem_sample" "CREATE TABLE sem_round (round int, pid int, fence bigint)" \
  "CREATE TABLE sem_sample (round int, in_use int, zcard text)" >/dev/null
A() { echo $((8100 + $1)); }
B() { echo $((8200 + $1)); }
# (wait names its jobs: a bare wait would also wait for the open sessions)
racers=()
session_open bar
session_q bar "SELECT pg_advisory_lock(8100 + r), pg_advisory_lock(8200 + r) FROM generate_series(1, $ROUNDS) r" >/dev/null
for i in $(seq $N); do
	{
		for r in $(seq $ROUNDS); do
			echo "SELECT pg_advisory_lock_shared($(A "$r")); SELECT pg_advisory_unlock_shared($(A "$r"));"
			echo "INSERT INTO sem_round SELECT $r, pg_backend_pid(), (rp_semaphore_acquire('race', $PERMITS, 300000)).fence;"
			echo "SELECT pg_advisory_lock_shared($(B "$r")); SELECT pg_advisory_unlock_shared($(B "$r"));"
			echo "SELECT rp_release_all();"
		done
	} | psql -X -q -At -v ON_ERROR_STOP=1 -d "$RP_DB" >"$RP_TMP/racer.$i" 2>&1 &
	racers+=($!)
done
session_q bar "SET client_min_messages = warning" >/dev/null
lap "1: setup"
T=$(now_ms)
drive=$(session_q bar "DO \$\$
DECLARE t timestamptz; k int;
BEGIN
  FOR r IN 1..$ROUNDS LOOP
    FOREACH k IN ARRAY ARRAY[8100 + r, 8200 + r] LOOP
      t := clock_timestamp();
      WHILE (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = k AND NOT granted) < $N LOOP
        IF clock_timestamp() > t + interval '120 seconds' THEN RAISE EXCEPTION 'round %: barrier % not reached', r, k; END IF;
        PERFORM pg_sleep(0.01);
      END LOOP;
      IF k = 8200 + r THEN
        INSERT INTO sem_sample SELECT r, (SELECT in_use FROM rp_semaphore_info('race')),
                                      rp_test.redis('ZCARD', rp_test.key('race', 'sem'));
      END IF;
      PERFORM pg_advisory_unlock(k);
    END LOOP;
  END LOOP;
END \$\$")
lap "1: drive"
wait "${racers[@]}"
session_close bar
lap "1: racers end"
is "$drive" "" "the barrier session drove $ROUNDS rounds"
diag "$ROUNDS rounds of $N callers took $(( $(now_ms) - T )) ms"
is "$(q "SELECT count(*) FROM sem_round")" "$((N * ROUNDS))" "$N callers made $ROUNDS attempts each"
is "$(q "SELECT string_agg(DISTINCT c::text, ',') FROM (SELECT count(fence) c FROM sem_round GROUP BY round) s")" "$PERMITS" \
	"every round, exactly $PERMITS of $N callers hold a permit (from the holders' own records)"
is "$(q "SELECT string_agg(DISTINCT in_use || '/' || zcard, ',') FROM sem_sample")" "$PERMITS/$PERMITS" \
	"sampled from Redis while they held: $PERMITS permits in use in each of the $ROUNDS rounds"
is "$(q "SELECT count(fence) = count(DISTINCT fence) FROM sem_round")" "t" "every permit's fence is unique"
is "$(q "SELECT count(*) FROM (SELECT round, min(fence) lo, max(fence) hi FROM sem_round GROUP BY round) a
         JOIN (SELECT round, min(fence) lo, max(fence) hi FROM sem_round GROUP BY round) b ON b.round = a.round + 1
         WHERE b.lo <= a.hi")" "0" "every round's fences are above the previous round's"
is "$(info race in_use)" "0" "every winner released its permit"
grep -l ERROR "$RP_TMP"/racer.* >/dev/null 2>&1; ok $((! $?)) "no caller saw an error"

lap "1: checks"
# ---- 2. waiting holders never overlap more than permits -----------------------
q "DROP TABLE IF EXISTS sem_hold" "CREATE TABLE sem_hold (pid int, fence bigint, t1 timestamptz, t2 timestamptz)" >/dev/null
barrier_hold 8301
for i in $(seq $NCHURN); do
	q "SELECT pg_advisory_lock_shared(8301)" \
	  "CREATE TEMP TABLE me AS SELECT rp_semaphore_acquire('churn', $PERMITS, 30000, 60000) l, clock_timestamp() t1" \
	  "SELECT pg_sleep(0.03)" \
	  "INSERT INTO sem_hold SELECT pg_backend_pid(), (l).fence, t1, clock_timestamp() FROM me" \
	  "SELECT rp_release((SELECT l FROM me))" >"$RP_TMP/churn.$i" 2>&1 &
done
barrier_release 8301 $NCHURN; wait
is "$(q "SELECT count(fence) FROM sem_hold")" "$NCHURN" "all $NCHURN waiting callers got a permit in turn"
overlap=$(q "SELECT max((SELECT count(*) FROM sem_hold o WHERE o.t1 <= h.t1 AND h.t1 < o.t2)) FROM sem_hold h")
diag "most holders at once, from their own timestamps: $overlap"
cmp_ok "$overlap" -le $PERMITS "never more than $PERMITS holders at once"
cmp_ok "$overlap" -ge 2 "and the holders did run concurrently (the check can see an overlap)"
is "$(q "SELECT count(DISTINCT fence) FROM sem_hold")" "$NCHURN" "with $NCHURN distinct fences"

lap "2 (waiting holders)"
# ---- 3. holders that die -------------------------------------------------------
# The naive twin: INCR to take, DECR to give back, DECR again if over.  Five
# holders die before their DECR; their permits are gone for good.
naive_take="SELECT CASE WHEN rp_test.redis('INCR', 'naive:sem')::int <= $PERMITS THEN 'got'
                        ELSE rp_test.redis('DECR', 'naive:sem') || ' refused' END"
redis del naive:sem >/dev/null
for i in $(seq $PERMITS); do
	q "SET application_name = 'naive-holder'" "$naive_take" "SELECT pg_sleep(60)" "SELECT rp_test.redis('DECR', 'naive:sem')" \
	  >/dev/null 2>&1 &
done
wait_for 60 '[ "$(redis get naive:sem)" = "$PERMITS" ]' || diag "the naive holders did not all take a permit in 60 s"
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'naive-holder'" >/dev/null
wait
sleep 1
is "$(q "$naive_take" | sed 's/^[0-9]* //')" "refused" \
	"naive INCR/DECR semaphore: its $PERMITS holders died, and 1 s later a newcomer is still refused"
is "$(redis get naive:sem)" "$PERMITS" "the counter says $PERMITS in use with no holder alive: the permits leaked for good"

lap "3: naive twin"
# Ours, holders hung (SIGSTOP: they cannot release): back within the TTL.
# No clock decides whether the refusal comes first: the holders take their
# permits for 10 minutes (a TTL no stall outlasts) and write down their
# tokens; once they are stopped and the newcomer was refused, this test
# shortens their permits to TTL with the pool-safe rp_extend(name, token,
# ttl_ms), and a newcomer that waits must get one once that TTL ends.  The
# time is the server's (session_timed, in the newcomer's session from just
# before the shortening): a slow psql start-up is not counted.
TTL=3000
q "DROP TABLE IF EXISTS sem_hung" "CREATE TABLE sem_hung (pid int, token text)" >/dev/null
for i in $(seq $PERMITS); do
	q "SET application_name = 'sem-holder'" \
	  "INSERT INTO sem_hung SELECT pg_backend_pid(), (rp_semaphore_acquire('dies', $PERMITS, 600000)).token" \
	  "SELECT pg_sleep(600)" >/dev/null 2>&1 &
done
wait_for 60 '[ "$(q "SELECT count(token) FROM sem_hung")" = $PERMITS ]' || diag "fewer than $PERMITS holders took a permit in 60 s"
pids=$(q "SELECT pid FROM sem_hung")
for p in $pids; do kill -STOP "$p"; done
is "$(q "SELECT rp_semaphore_acquire('dies', $PERMITS, 10000) IS NULL")" "t" "$PERMITS hung holders: a newcomer is refused"
session_open nc
session_timed nc "SELECT count(*) FROM sem_hung WHERE (rp_extend('dies', token, $TTL)).token IS NOT NULL; SELECT (rp_semaphore_acquire('dies', $PERMITS, 10000, 30000)).fence IS NOT NULL"
session_close nc
diag "the hung holders' permits came back $TIMED_MS ms after they were shortened to a TTL of $TTL ms (server clock)"
is "$(echo $TIMED_OUT)" "$PERMITS t" "a waiting newcomer gets a permit once the hung holders' TTL ends"
# Not before the TTL either: a permit back at once (rp_extend ending it, a
# prune that ignores the score) is the holders' place given away while they
# still held it (an extend that read ttl_ms as seconds: 37 ms, passed).
cmp_ok "$TIMED_MS" -ge $((TTL - 100)) "at the TTL, not before it ends (${TIMED_MS:-?} ms, TTL $TTL ms)"
for p in $pids; do kill -CONT "$p"; done
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'sem-holder'" >/dev/null
wait

lap "3: hung holders"
# Terminated holders: exit release gives the permits back at once.
for i in $(seq $PERMITS); do
	q "SET application_name = 'sem-holder2'" "SELECT (rp_semaphore_acquire('killed', $PERMITS, 60000)).fence" "SELECT pg_sleep(60)" \
	  >/dev/null 2>&1 &
done
wait_for 60 '[ "$(info killed in_use)" = "$PERMITS" ]'
held_before=$(info killed in_use)   # else "released" below would hold for permits never taken
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'sem-holder2'" >/dev/null
wait
wait_for 30 '[ "$(info killed in_use)" = 0 ]'   # a backend's exit may lag its FATAL on a loaded machine
is "$held_before>$(info killed in_use)" "$PERMITS>0" "terminated holders' permits (60 s TTL) are released by their backends' exit"

lap "3: terminated holders"
# ---- 4. cancel and statement_timeout end a wait ---------------------------------
# Both timed on the server's clock, in the waiting session: a slow psql
# start-up is not counted, only how long the wait took to end.
session_open h
session_q h "SELECT (rp_semaphore_acquire('gate', 1, 600000)).fence IS NOT NULL" >/dev/null   # held until released below
session_open w
session_timed w "SET statement_timeout = 700; SELECT rp_semaphore_acquire('gate', 1, 30000, 60000); RESET statement_timeout"
is "$(echo "$TIMED_OUT" | sed -n 's/^ERROR:  *\([0-9A-Z]\{5\}\).*$/\1/p')" "57014" \
	"statement_timeout ends a wait for a permit (57014), before wait_ms (${TIMED_MS:-?} ms)"
# The waiter is cancelled once it is seen waiting (wait_event LeaseWait) in
# the call; the time runs from just before the cancel to the waiter's next
# statement.
wpid=$(session_pid w)
printf '%s\n' "SELECT rp_semaphore_acquire('gate', 1, 30000, 60000);" "SELECT 'T1 ' || $ms_sql;" >&"$_fd_w"
waiting="SELECT count(*) FROM pg_stat_activity WHERE pid = $wpid AND wait_event = '$(wait_event LeaseWait)' AND query LIKE '%rp_semaphore_acquire(%'"
t_cancel=
wait_for 30 '[ "$(q "$waiting")" = 1 ]' && t_cancel=$(q "SELECT $ms_sql" "SELECT pg_cancel_backend($wpid)" | head -1)
out=$(session_q w "SELECT 1")
t1=$(echo "$out" | sed -n 's/^T1 //p')
elapsed=; [ -n "$t_cancel" ] && [ -n "$t1" ] && elapsed=$((t1 - t_cancel))
diag "the cancelled wait ended ${elapsed:-?} ms after pg_cancel_backend (server clock)$([ -n "$t_cancel" ] || echo ': the waiter was never seen waiting')"
echo "$out" | grep -q "^ERROR:  57014"; ok $? "pg_cancel_backend ends a wait with 57014 (canceling statement due to user request)"
session_close w
wait_for 30 '[ "$(info gate waiters)" = 0 ]'
is "$(info gate waiters)" "0" "the ended waiters' places lapse (heartbeat 2 s)"
session_q h "SELECT rp_release_all()" >/dev/null
is "$(q "SELECT rp_semaphore_acquire('gate', 1, 1000) IS NOT NULL")" "t" "and they hold up no one: the freed permit goes to a newcomer"

lap "4 (cancel, statement_timeout)"
# ---- 5. fairness ----------------------------------------------------------------
session_q h "CREATE TEMP TABLE f AS SELECT (rp_semaphore_acquire('fair', 1, 600000)).fence" >/dev/null   # held until released below
hfence=$(session_q h "SELECT fence FROM f")
q "SELECT (rp_semaphore_acquire('fair', 1, 30000, 120000)).fence" "SELECT pg_sleep(0.1)" "SELECT rp_release_all()" \
	>"$RP_TMP/early.out" 2>&1 &
early=$!
wait_for 60 '[ "$(info fair waiters)" -ge 1 ]' || diag "the early waiter was not seen waiting in 60 s"
newcomers=()
q "DROP TABLE IF EXISTS sem_newcomer" "CREATE TABLE sem_newcomer (fence bigint)" >/dev/null
# Each newcomer retries at once until it has had 2 permits (120 s at most:
# the bounds only end a broken run, a fast one never nears them).
for i in $(seq 8); do
	q "DO \$\$ DECLARE l rp_lease; got int := 0; t timestamptz := clock_timestamp(); BEGIN
	     WHILE got < 2 AND clock_timestamp() < t + interval '120 seconds' LOOP
	       l := rp_semaphore_acquire('fair', 1, 30000, 3000);
	       IF l IS NOT NULL THEN got := got + 1; INSERT INTO sem_newcomer VALUES (l.fence); PERFORM pg_sleep(0.01); PERFORM rp_release(l); END IF;
	     END LOOP; END \$\$" >"$RP_TMP/newcomer.$i" 2>&1 &
	newcomers+=($!)
done
# The newcomers queue up behind the early waiter before the permit frees.
w=; wait_for 60 'w=$(info fair waiters); [ "$w" -ge 9 ]'
cmp_ok "$w" -ge 9 "the early waiter and 8 newcomers wait in the queue"
session_q h "SELECT rp_release_all()" >/dev/null
wait "$early" "${newcomers[@]}"
efence=$(head -1 "$RP_TMP/early.out")
diag "holder fence $hfence, early waiter $efence, newcomers got $(q "SELECT count(*) FROM sem_newcomer") permits"
is "$efence" "$((hfence + 1))" "the early waiter gets the very next permit, ahead of 8 newcomers queued behind it"
is "$(q "SELECT count(*) FROM sem_newcomer")" "16" "the newcomers were served too, twice each (the stream was real)"
session_close h

lap "5 (fairness)"
# ---- 6. the transaction form ----------------------------------------------------
out=$(q "BEGIN" "SELECT rp_semaphore_acquire_xact('sx', 2, 30000) IS NOT NULL" "SELECT in_use FROM rp_semaphore_info('sx')" \
        "COMMIT" "SELECT in_use FROM rp_semaphore_info('sx')")
is "$(echo $out)" "t 1 0" "rp_semaphore_acquire_xact: held in the transaction, released at COMMIT"
out=$(q "BEGIN" "SELECT rp_semaphore_acquire_xact('sx', 2, 30000) IS NOT NULL" "ROLLBACK" "SELECT in_use FROM rp_semaphore_info('sx')")
is "$(echo $out)" "t 0" "released at ROLLBACK"

lap "6 (xact)"
# ---- 7. a wait ended by an error reply ------------------------------------------
# The waiter's next attempt is refused by Redis (OOM under maxmemory): that
# attempt did not run, but the place its earlier ones took in the queue is
# there, and the abort must take it out (semaphore_release runs under
# maxmemory), not leave it to hold up every newcomer for its heartbeat.
session_open h
session_q h "SELECT (rp_semaphore_acquire('oomq', 1, 600000)).fence IS NOT NULL" >/dev/null
session_open w
wpid=$(session_pid w)
printf '%s\n' "SELECT rp_semaphore_acquire('oomq', 1, 30000, 60000);" >&"$_fd_w"
wait_for 30 '[ "$(redis zcard "$(key oomq semq)")" = 1 ]' || diag "the waiter was not seen in the queue"
# Stopped while maxmemory is set and the counts are zeroed: from then on its
# attempts are refused uncounted, and the one script call is its abort's.
kill -STOP "$wpid"
redis config set maxmemory 1 >/dev/null
redis config resetstat >/dev/null
kill -CONT "$wpid"
out=$(session_q w "SELECT 1")
calls=$(script_calls)
queued=$(redis zcard "$(key oomq semq)")
redis config set maxmemory 0 >/dev/null
is "$(echo "$out" | grep -o '^ERROR:  [0-9A-Z]*' | head -1)|$queued|$([ "$calls" -ge 1 ] && echo released)" "ERROR:  53200|0|released" \
	"a waiter's attempt refused with OOM fails (53200), and its abort takes its place out of the queue ($calls script call(s))"
session_close w
session_q h "SELECT rp_release_all()" >/dev/null
session_close h

q "DROP TABLE sem_round, sem_sample, sem_hold, sem_hung, sem_newcomer" >/dev/null
lap "7 (error reply)"
finish
