#!/usr/bin/env bash
# pool_semaphore.sh -- a semaphore's limit through a pool of shared backends.
#
# pool_exclusion.sh's hole, for permits: behind pg.Pool or PgBouncer in
# transaction mode the session is not the request, and session-wide
# re-entry ("a semaphore this session holds a permit of hands that permit
# back") lets a second request in on the first one's permit, so more
# requests are inside than the semaphore has permits.  A permit re-enters
# only inside the transaction that took it; a later transaction of the
# session asking for the same semaphore takes a permit of its own (or waits,
# or gets NULL).  So one session may hold several permits of one semaphore:
# rp_release(name) gives back the newest, and DISCARD ALL, backend exit and
# the transaction's abort still end every one.
#
# The pool: 16 workers x 15 critical sections on a semaphore of 3 permits
# (acquire, 3 ms inside, rp_release(name, token)) over a pool of 8 and
# through PgBouncer: never more than 3 inside, never two with one token.
# The naive twin is session-wide re-entry, built in SQL from rp_leases().
source "$(dirname "$0")/tap.bash"
plan 20

drive() { /usr/bin/python3 "$(dirname "$0")/pool_exclusion.py" "$@" 2>"$RP_TMP/pool_semaphore.err"; }
num() { echo "$1" | sed -n "s/.*$2 \([0-9]*\).*/\1/p"; }
dsn="host=$PGHOST port=$PGPORT dbname=$RP_DB user=$PGUSER"
info() { q "SELECT $2 FROM rp_semaphore_info('$1')"; }

# ---- one transaction: one permit ------------------------------------------------
is "$(q "SELECT count(DISTINCT token) FROM (SELECT (rp_semaphore_acquire('ps-once', 3, 30000)).*) l, generate_series(1, 3)" \
	   "SELECT in_use FROM rp_semaphore_info('ps-once')")" "1
1" "(rp_semaphore_acquire(...)).* in one statement is one permit"
is "$(q "BEGIN" "SELECT (rp_semaphore_acquire('ps-twice', 3, 30000)).token = (rp_semaphore_acquire('ps-twice', 3, 30000)).token" \
	   "COMMIT" "SELECT in_use FROM rp_semaphore_info('ps-twice')")" "t
1" "asking twice in one transaction hands back the permit it took"
q "SELECT rp_release_all()" >/dev/null

# ---- a later transaction of the session: a permit of its own ---------------------
# (q runs each command in a transaction of its own, in one session.)
is "$(q "CREATE TEMP TABLE t AS SELECT 1 n, token FROM rp_semaphore_acquire('ps-later', 3, 30000)" \
	   "INSERT INTO t SELECT 2, token FROM rp_semaphore_acquire('ps-later', 3, 30000)" \
	   "SELECT count(DISTINCT token) FROM t" "SELECT in_use FROM rp_semaphore_info('ps-later')" \
	   "SELECT count(*) FROM rp_leases() WHERE name = 'ps-later'")" "2
2
2" "a later transaction of the session takes a second permit, not the first one's: 2 tokens, 2 in use, 2 listed"
q "SELECT rp_release_all()" >/dev/null
is "$(q "SELECT fence > 0 FROM rp_semaphore_acquire('ps-one', 1, 30000)" \
	   "SELECT rp_semaphore_acquire('ps-one', 1, 30000) IS NULL" \
	   "SELECT rp_semaphore_acquire('ps-one', 1, 30000, 300) IS NULL" \
	   "SELECT in_use || ' ' || waiters FROM rp_semaphore_info('ps-one')" \
	   "SELECT count(*) FROM rp_leases() WHERE name = 'ps-one'")" "t
t
t
1 0
1" "the only permit held by an earlier transaction: a later one gets NULL (and after wait_ms), the first stays held"
q "SELECT rp_release_all()" >/dev/null

# ---- rp_release(name) with two permits: the newest ------------------------------
out=$(q "CREATE TEMP TABLE t AS SELECT 1 n, token FROM rp_semaphore_acquire('ps-rel', 3, 30000)" \
	"INSERT INTO t SELECT 2, token FROM rp_semaphore_acquire('ps-rel', 3, 30000)" \
	"SELECT rp_release('ps-rel')" "SELECT string_agg(n::text, ',') FROM t JOIN rp_leases() USING (token)" \
	"SELECT in_use FROM rp_semaphore_info('ps-rel')" "SELECT rp_release('ps-rel')" \
	"SELECT count(*) FROM rp_leases()" "SELECT in_use FROM rp_semaphore_info('ps-rel')" 2>&1)
is "$(echo $out)" "t 1 1 t 0 0" \
	"rp_release(name) of two permits releases the newest (the first stays, 1 in use), then the other"
is "$(q "SET client_min_messages = error" "SELECT rp_release('ps-rel')")" "f" "... then finds none"

# ---- every permit ends: DISCARD ALL, exit, abort -------------------------------------
is "$(q "SELECT fence > 0 FROM rp_semaphore_acquire('ps-discard', 3, 30000)" \
	   "SELECT fence > 0 FROM rp_semaphore_acquire('ps-discard', 3, 30000)" \
	   "SELECT in_use FROM rp_semaphore_info('ps-discard')" "DISCARD ALL" \
	   "SELECT count(*) FROM rp_leases()" "SELECT in_use FROM rp_semaphore_info('ps-discard')")" "t
t
2
0
0" "DISCARD ALL releases both permits the session took"
q "SELECT fence > 0 FROM rp_semaphore_acquire('ps-exit', 3, 60000)" \
  "SELECT fence > 0 FROM rp_semaphore_acquire('ps-exit', 3, 60000)" >/dev/null
wait_for 30 '[ "$(info ps-exit in_use)" = 0 ]'
is "$(info ps-exit in_use)" "0" "backend exit releases both permits the session took (within 30 s, not their 60 s TTL)"
is "$(q "CREATE TEMP TABLE t AS SELECT token FROM rp_semaphore_acquire('ps-abort', 3, 30000)" \
	   "BEGIN" "SELECT l.token <> t.token FROM rp_semaphore_acquire_xact('ps-abort', 3, 30000) l, t" \
	   "SELECT in_use FROM rp_semaphore_info('ps-abort')" "ROLLBACK" \
	   "SELECT in_use FROM rp_semaphore_info('ps-abort')" \
	   "SELECT count(*) FROM rp_leases() l JOIN t USING (token)" "SELECT count(*) FROM rp_leases()")" "t
2
1
1
1" "rp_semaphore_acquire_xact in a later transaction takes its own permit; ROLLBACK releases it, not the session's"
is "$(q "CREATE TEMP TABLE t AS SELECT token FROM rp_semaphore_acquire('ps-sub', 3, 30000)" \
	   "BEGIN" "SAVEPOINT s" "SELECT fence > 0 FROM rp_semaphore_acquire_xact('ps-sub', 3, 30000)" \
	   "SELECT in_use FROM rp_semaphore_info('ps-sub')" "ROLLBACK TO SAVEPOINT s" \
	   "SELECT in_use FROM rp_semaphore_info('ps-sub')" "COMMIT" \
	   "SELECT count(*) FROM rp_leases() l JOIN t USING (token)")" "t
2
1
1" "a subtransaction's rollback releases the permit it took, not the session's"
q "SELECT rp_release_all()" >/dev/null

# ---- a pool of 8 -----------------------------------------------------------------
out=$(drive --dsn "$dsn" --pool 8 --permits 3 ps-pool8)
diag "pool of 8, 3 permits: $out"
is "$(num "$out" entries)" "240" "pool of 8: 16 workers x 15 critical sections all entered"
is "$(num "$out" overlaps)" "0" "pool of 8: no entry made more than 3 workers inside"
is "$(num "$out" same_token)" "0" "pool of 8: no worker was handed a permit another worker inside held"
is "$(num "$out" errors)" "0" "pool of 8: no call failed"
[ "$(num "$out" errors)" = 0 ] || diag "$(head -3 "$RP_TMP/pool_semaphore.err")"

out=$(drive --dsn "$dsn" --pool 8 --permits 3 --naive ps-naive)
diag "pool of 8, 3 permits, naive: $out"
cmp_ok "$(num "$out" overlaps)" -gt 0 "naive (session-wide re-entry): entries that made more than 3 workers inside"
cmp_ok "$(num "$out" same_token)" -gt 0 "naive: ... handed the very permit another worker inside held"

# ---- PgBouncer, transaction mode ---------------------------------------------------
txn_bouncer ps-bouncer
out=$(drive --dsn "host=127.0.0.1 port=$BPORT dbname=txn user=$PGUSER" --per-worker --permits 3 ps-bouncer)
diag "PgBouncer (transaction mode, 8 server connections), 3 permits: $out"
is "$(num "$out" entries)" "240" "PgBouncer: 16 workers x 15 critical sections all entered"
[ "$(num "$out" errors)" = 0 ] || diag "$(head -3 "$RP_TMP/pool_semaphore.err")"
is "$(num "$out" overlaps)" "0" "PgBouncer: no entry made more than 3 workers inside"
is "$(num "$out" same_token)" "0" "PgBouncer: no worker was handed a permit another worker inside held"

# Every worker released by token: nothing is left in use or queued.
is "$(info ps-pool8 "in_use || ' ' || waiters") $(info ps-bouncer "in_use || ' ' || waiters")" "0 0 0 0" \
	"after the runs: no permit in use, no waiter queued"
finish
