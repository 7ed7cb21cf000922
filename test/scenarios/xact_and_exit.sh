#!/usr/bin/env bash
# Leases that follow transactions and sessions.  rp_acquire_xact behaves like
# pg_advisory_xact_lock: gone at commit, rollback or error, and with its
# subtransaction.  verify_at_commit turns a lease lost mid-transaction into a
# failed commit (RP002) instead of a committed write made without the lock.
# Backend exit releases whatever the session still holds.
source "$(dirname "$0")/tap.bash"
source "$(dirname "$0")/../../scripts/lib.sh"
plan 31
held() { q "SELECT (rp_lock_info('$1')).held"; }
# in_s SQL OUTPUT DESCRIPTION: session s runs SQL; its output, on one line, is OUTPUT.
in_s() { is "$(echo $(session_q s "$1"))" "$2" "$3"; }
# released NAME: Redis has no lease on the name within 120 s (status 0), and
# $el is the ms it took.  Asked of Redis (redis-cli starts faster than psql
# under load).  The leases are 600 s long: a few ms when released, far more
# than any busy machine delays a release, far less than the TTL when not.
released() {
	local t rc; t=$(now_ms)
	wait_for 120 "[ \"\$(redis exists '$(key "$1" lock)')\" = 0 ]"; rc=$?
	el=$(( $(now_ms) - t )); return $rc
}

out=$(q "BEGIN" "SELECT (rp_acquire_xact('x1', 30000)).fence IS NOT NULL" "SELECT count(*) FROM rp_leases()" \
        "SELECT (rp_lock_info('x1')).held" "COMMIT" "SELECT (rp_lock_info('x1')).held" "SELECT count(*) FROM rp_leases()")
is "$(echo $out)" "t 1 t f 0" "rp_acquire_xact: held and listed during the transaction, released at COMMIT"
out=$(q "BEGIN" "SELECT (rp_acquire_xact('x2', 30000)).fence IS NOT NULL" "ROLLBACK" "SELECT (rp_lock_info('x2')).held")
is "$(echo $out)" "t f" "released at ROLLBACK"

session_open s
in_s "BEGIN; SELECT (rp_acquire_xact('x3', 30000)).fence IS NOT NULL; SELECT 1/0; ROLLBACK; SELECT (rp_lock_info('x3')).held" "t ERROR: 22012 f" "released when an error aborts the transaction"

in_s "BEGIN; SAVEPOINT a; SELECT (rp_acquire_xact('x4', 30000)).fence IS NOT NULL; ROLLBACK TO a; SELECT (rp_lock_info('x4')).held; SELECT count(*) FROM rp_leases()" "t f 0" "taken in a subtransaction that rolls back: released at the rollback"
in_s "SAVEPOINT b; SELECT (rp_acquire_xact('x4b', 30000)).fence IS NOT NULL; RELEASE b; SELECT (rp_lock_info('x4b')).held; COMMIT; SELECT (rp_lock_info('x4b')).held" "t t f" "taken in a subtransaction that commits: held until the top-level COMMIT"
# Inside an open transaction, checked before COMMIT: the commit would release
# the lease anyway, so only this shows the block's own release.
in_s "BEGIN; DO \$\$ BEGIN BEGIN PERFORM rp_acquire_xact('x5', 30000); PERFORM 1/0; EXCEPTION WHEN division_by_zero THEN NULL; END; END \$\$; SELECT (rp_lock_info('x5')).held; SELECT count(*) FROM rp_leases(); COMMIT" "f 0" "taken in a PL/pgSQL block whose exception was caught: released with the block, before the transaction ends"
in_s "BEGIN; SELECT (rp_acquire_xact('xp', 30000)).fence IS NOT NULL; PREPARE TRANSACTION 'rp_px'; SELECT (rp_lock_info('xp')).held" "t ERROR: 0A000 f" "PREPARE TRANSACTION with an xact lease is refused (0A000), and the lease released with the abort"
in_s "BEGIN; SELECT (rp_acquire('x6', 30000)).fence IS NOT NULL; ROLLBACK; SELECT (rp_lock_info('x6')).held; SELECT rp_release('x6')" "t t t" "a session lease (rp_acquire) survives ROLLBACK, like pg_advisory_lock"

# The commit-time check.  A 300 ms lease expires mid-transaction and another
# holder takes the lock; the naive transaction commits its write anyway.
q "CREATE TABLE IF NOT EXISTS ledger (entry text)" "TRUNCATE ledger" >/dev/null
lost_lease() {  # verify label
	session_q s "BEGIN; SELECT rp_acquire_xact('x7', 300, 0, 0, $1) IS NOT NULL; INSERT INTO ledger VALUES ('$2'); SELECT pg_sleep(0.4)" >/dev/null
	second=$(q "SELECT (rp_acquire('x7', 30000)).fence IS NOT NULL")   # a second holder
	session_q s "COMMIT"
	q "SELECT rp_release_all()" >/dev/null
}
lost_lease false naive >"$RP_TMP/naive.out"
is "$(cat "$RP_TMP/naive.out")|$(q "SELECT count(*) FROM ledger WHERE entry = 'naive'")" "|1" "without verify_at_commit, the transaction commits after its lease was lost"
is "$second" "t" "and a second holder had acquired the lock before that commit: the naive write landed under someone else's lease"
q "SELECT rp_test.redis('DEL', rp_test.key('x7', 'lock'))" >/dev/null
out=$(lost_lease true verified)
is "$out" "ERROR:  RP002" "with verify_at_commit, COMMIT fails with RP002"
is "$(q "SELECT count(*) FROM ledger WHERE entry = 'verified'")" "0" "and the write is rolled back"
q "SELECT rp_test.redis('DEL', rp_test.key('x7', 'lock'))" >/dev/null
in_s "BEGIN; SELECT rp_acquire_xact('x7', 30000, 0, 0, true) IS NOT NULL; INSERT INTO ledger VALUES ('kept'); COMMIT; SELECT count(*) FROM ledger WHERE entry = 'kept'; SELECT (rp_lock_info('x7')).held" "t 1 f" "a lease still held passes the check; the commit lands and releases it"

# PREPARE TRANSACTION with a verify_at_commit check owed.  COMMIT PREPARED
# runs no check, in this session or another: PREPARE is refused (0A000), the
# transaction rolled back, and nothing of its check reaches the session's
# next transaction.  (The harness runs with max_prepared_transactions = 10.)
# prepared GID: how many prepared transactions of that GID exist; a leftover
# is rolled back, so a failure here blocks none of the later checks.
prepared() {
	local n; n=$(q "SELECT count(*) FROM pg_prepared_xacts WHERE gid = '$1'")
	[ "$n" = 0 ] || q "ROLLBACK PREPARED '$1'" >/dev/null
	echo "$n"
}
# (a) A session lease re-entered with verify_at_commit, lost before PREPARE.
session_q s "BEGIN; SELECT (rp_acquire('p1', 30000)).fence IS NOT NULL; SELECT (rp_acquire_xact('p1', 30000, 0, 0, verify_at_commit => true)).fence IS NOT NULL; INSERT INTO ledger VALUES ('prep-a')" >/dev/null
redis set "$(key p1 lock)" other px 30000 >/dev/null
in_s "PREPARE TRANSACTION 'rp_pa'; SELECT 1" "ERROR: 0A000 1" "PREPARE with a session lease re-entered for verify_at_commit is refused (0A000); the next statement runs"
is "$(prepared rp_pa)|$(q "SELECT count(*) FROM ledger WHERE entry = 'prep-a'")" "0|0" "and nothing is prepared: the write made after the lease was lost never commits"
session_q s "SELECT rp_release_all()" >/dev/null
redis del "$(key p1 lock)" >/dev/null
# (b) An xact lease with verify_at_commit, lost (its key gone from Redis)
# and its name taken again with rp_acquire: the check owed can only fail.
session_q s "BEGIN; SELECT (rp_acquire_xact('q1', 300, 0, 0, verify_at_commit => true)).fence IS NOT NULL; INSERT INTO ledger VALUES ('prep-b')" >/dev/null
wait_for 30 "[ \"\$(redis exists '$(key q1 lock)')\" = 0 ]"
in_s "SELECT (rp_acquire('q1', 30000)).fence IS NOT NULL; PREPARE TRANSACTION 'rp_pq'; SELECT 1" "t ERROR: 0A000 1" "PREPARE after a verify_at_commit lease was lost and its name re-acquired is refused (0A000); the next statement runs"
is "$(prepared rp_pq)|$(q "SELECT count(*) FROM ledger WHERE entry = 'prep-b'")" "0|0" "and nothing is prepared: the write never commits"
session_q s "SELECT rp_release_all()" >/dev/null
# A session lease with no check owed is no reason to refuse.
in_s "BEGIN; SELECT (rp_acquire('p2', 30000)).fence IS NOT NULL; INSERT INTO ledger VALUES ('prep-c'); PREPARE TRANSACTION 'rp_pc'; SELECT 1" "t 1" "PREPARE with a session lease and no verify_at_commit is allowed"
q "COMMIT PREPARED 'rp_pc'" >/dev/null
is "$(q "SELECT count(*) FROM ledger WHERE entry = 'prep-c'")|$(session_q s "SELECT rp_release('p2')")" "1|t" "COMMIT PREPARED lands it; the session lease stays the session's"

# A lost verify_at_commit lease's check belongs to the subtransaction that
# took the lease: a ROLLBACK TO SAVEPOINT past it drops the check with the
# lease, a RELEASE hands it to the parent, and one owed by the parent
# survives a rolled-back subtransaction that re-acquired the name.
# lose NAME: wait (bounded) until Redis no longer holds the name's key; a
# 300 ms lease's local deadline passes before its key expires in Redis.
lose() { wait_for 30 "[ \"\$(redis exists '$(key "$1" lock)')\" = 0 ]"; }
session_q s "BEGIN; SAVEPOINT sv; SELECT (rp_acquire_xact('w1', 300, 0, 0, verify_at_commit => true)).fence IS NOT NULL" >/dev/null
lose w1
in_s "SELECT (rp_acquire_xact('w1', 30000)).fence IS NOT NULL; ROLLBACK TO sv; INSERT INTO ledger VALUES ('sv-unrelated'); COMMIT; SELECT count(*) FROM ledger WHERE entry = 'sv-unrelated'" "t 1" "a lost verify_at_commit lease re-acquired inside a savepoint rolled back: the check goes with it, COMMIT lands"
session_q s "BEGIN; SELECT (rp_acquire_xact('w2', 300, 0, 0, verify_at_commit => true)).fence IS NOT NULL; INSERT INTO ledger VALUES ('sv-outer')" >/dev/null
lose w2
in_s "SAVEPOINT sv; SELECT (rp_acquire_xact('w2', 30000)).fence IS NOT NULL; ROLLBACK TO sv; COMMIT; SELECT count(*) FROM ledger WHERE entry = 'sv-outer'" "t ERROR: RP002 0" "lost at the top level, re-acquired in a savepoint rolled back: the check is still owed (RP002)"
session_q s "BEGIN; SAVEPOINT sv; SELECT (rp_acquire_xact('w3', 300, 0, 0, verify_at_commit => true)).fence IS NOT NULL; INSERT INTO ledger VALUES ('sv-released')" >/dev/null
lose w3
in_s "SELECT (rp_acquire_xact('w3', 30000)).fence IS NOT NULL; RELEASE sv; COMMIT; SELECT count(*) FROM ledger WHERE entry = 'sv-released'" "t ERROR: RP002 0" "lost in a savepoint that is released: the parent owes the check (RP002)"

# Release at transaction end never raises, even with Redis hung: waited
# for (release_at_commit = wait), it warns; sent, it does not wait
# (release_at_commit.sh).
session_q s "SET redis_primitives.release_at_commit = wait" >/dev/null
session_q s "BEGIN; SELECT rp_acquire_xact('x8', 2000) IS NOT NULL" >/dev/null
kill -STOP "$(cat "$RP_TMP/redis-$REDIS_PORT.pid")"
# (How long the COMMIT takes: test/timing/xact_and_exit.sh.)
out=$(session_q s "COMMIT")
kill -CONT "$(cat "$RP_TMP/redis-$REDIS_PORT.pid")"
echo "$out" | grep -q "^WARNING" && ! echo "$out" | grep -q "ERROR"; ok $? "COMMIT with Redis hung: a WARNING, not an error"
is "$(session_q s "SELECT count(*) FROM rp_leases()")" "0" "the session no longer believes it holds the lease"
# Redis may still run the buffered release when it wakes; if it did not, the
# lease is bounded by its TTL: the key is gone, or carries a TTL <= 2 s.
ttl=$(redis pttl "$(key x8 lock)")
ok $([ "$ttl" -eq -2 ] || { [ "$ttl" -gt 0 ] && [ "$ttl" -le 2000 ]; }; echo $?) "the lease left in Redis is bounded by its TTL (pttl $ttl)"
session_q s "SET statement_timeout = '300ms'" >/dev/null
t=$(now_ms); out=$(session_q s "SELECT pg_sleep(3)"); el=$(( $(now_ms) - t ))
is "$out" "ERROR:  57014" "interrupts still work after a failed cleanup ($el ms)"
session_close s

# Backend exit releases what the session holds.
q "SELECT (rp_acquire('x9', 600000)).fence IS NOT NULL" >/dev/null
released x9; ok $? "a normal disconnect releases the session's lease, not left for its 600 s TTL ($el ms)"
psql -X -q -d "$RP_DB" -c "SET application_name = 'victim'" -c "SELECT rp_acquire('x10', 600000)" -c "SELECT pg_sleep(60)" >/dev/null 2>&1 &
victim=$!
wait_for 30 '[ "$(held x10)" = t ]'
is "$(held x10)" "t" "the victim holds a 600 s lease"
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'victim'" >/dev/null
released x10; rc=$?; wait $victim
ok $rc "pg_terminate_backend releases it too ($el ms)"

# A waiting backend shows up in pg_stat_activity.  It waits until the test
# frees the name (60 s at most), not for a fixed 5 s that a slow psql
# start-up could use up (a 5 s stall: nothing seen, '').  Between tries it
# sleeps (LeaseWait), in each try it waits for Redis' answer (Reply): the
# check's is the sleep's, the one it spends nearly all its time in (30 s at
# most; the last event seen fails the check).
redis set "$(key x11 lock)" other px 120000 >/dev/null
psql -X -q -d "$RP_DB" -c "SET application_name = 'waiter'" -c "SELECT rp_acquire('x11', 1000, 60000)" >/dev/null 2>&1 &
waiter=$!
ev_now() { ev=$(q "SELECT wait_event_type || '/' || wait_event FROM pg_stat_activity WHERE application_name = 'waiter' AND state = 'active'"); }
ev=""; wait_for 30 'ev_now; [ "$ev" = "Extension/$(wait_event LeaseWait)" ]'
is "$ev" "Extension/$(wait_event LeaseWait)" "a waiting rp_acquire shows wait_event_type Extension, wait_event $(wait_event LeaseWait) in pg_stat_activity"
redis del "$(key x11 lock)" >/dev/null
wait $waiter

# A backend that exits inside a transaction releases its lease once: the
# exit's release (which warns, Redis not answering, and hands the lease to
# the background worker), not again by the abort that follows it, which
# would wait the cleanup deadline a second time and warn again.  Counted in
# the server log by the backend's pid; the worker releases it afterwards.
session_open d
pid=$(session_pid d)
session_q d "BEGIN; SELECT rp_acquire_xact('x12', 60000) IS NOT NULL" >/dev/null
log0=$(( $(stat -c %s "$RP_TMP/pg.log") + 1 ))
redis client pause 20000 write >/dev/null
q "SELECT pg_terminate_backend($pid)" >/dev/null
backend_gone "$pid"
redis client unpause >/dev/null
wait_for 30 '[ "$(redis exists "$(key x12 lock)")" = 0 ]'
is "$(tail -c +"$log0" "$RP_TMP/pg.log" | grep -ac "\[$pid\] WARNING:  could not release") $(redis exists "$(key x12 lock)")" "1 0" \
	"terminated inside a transaction with Redis not answering: one release (one WARNING), not a second at the abort; the worker releases it"
session_close d
finish
