#!/usr/bin/env bash
# pool_exclusion.sh -- mutual exclusion through a pool of shared backends.
#
# An application's requests share backends: pg.Pool hands each query to
# whichever connection is free, PgBouncer in transaction mode each
# transaction to whichever server connection is free.  So the session is not
# the request, and re-entry ("a name this session holds comes back as it
# is") would hand one request's lease to another.  Re-entry is confined to
# the transaction that took the lease; in a later transaction a held name is
# held.  16 workers x 15 critical sections on one name (acquire, 3 ms inside,
# rp_release(name, token)) over a pool of 8 and through PgBouncer: no entry
# while another worker is inside.  The naive twin is session-wide re-entry,
# built in SQL from rp_leases().  Then the lock-bound guard's side of the
# same hole: a guarded write that lands on the backend holding another
# request's session lease, refused by a guard with the 'xact' option.
source "$(dirname "$0")/tap.bash"
plan 15

drive() { /usr/bin/python3 "$(dirname "$0")/pool_exclusion.py" "$@" 2>"$RP_TMP/pool_exclusion.err"; }
num() { echo "$1" | sed -n "s/.*$2 \([0-9]*\).*/\1/p"; }
dsn="host=$PGHOST port=$PGPORT dbname=$RP_DB user=$PGUSER"

# ---- one transaction: one lease --------------------------------------------
is "$(q "SELECT count(DISTINCT token) FROM (SELECT (rp_acquire('pe-once', 30000)).*) l, generate_series(1, 3)")" "1" \
	"(rp_acquire(...)).* in one statement is one lease"
is "$(q "BEGIN" "SELECT (rp_acquire('pe-twice', 30000)).token = (rp_acquire('pe-twice', 30000)).token" "COMMIT")" "t" \
	"acquiring twice in one transaction hands back the lease it took"
is "$(q "SELECT fence > 0 FROM rp_acquire('pe-later', 30000)" "SELECT rp_acquire('pe-later', 30000) IS NULL" \
	   "SELECT count(*) FROM rp_leases() WHERE name = 'pe-later'")" "t
t
1" "a later transaction of the session is refused the name its earlier one holds (NULL), which stays held"
is "$(q "SELECT fence > 0 FROM rp_acquire('pe-ext', 30000)" \
	   "SELECT (rp_extend(l, 30000)).fence = l.fence FROM rp_leases() l WHERE name = 'pe-ext'")" "t
t" "... and rp_extend is how its holder keeps it"
q "SELECT rp_release_all()" >/dev/null

# ---- a pool of 8 -------------------------------------------------------------
out=$(drive --dsn "$dsn" --pool 8 pe-pool8)
diag "pool of 8: $out"
is "$(num "$out" entries)" "240" "pool of 8: 16 workers x 15 critical sections all entered"
is "$(num "$out" overlaps)" "0" "pool of 8: no entry while another worker was inside"
is "$(num "$out" errors)" "0" "pool of 8: no call failed"
[ "$(num "$out" errors)" = 0 ] || diag "$(head -3 "$RP_TMP/pool_exclusion.err")"

out=$(drive --dsn "$dsn" --pool 8 --naive pe-naive)
diag "pool of 8, naive: $out"
cmp_ok "$(num "$out" overlaps)" -gt 0 "naive (session-wide re-entry): entries while another worker was inside"
cmp_ok "$(num "$out" same_token)" -gt 0 "naive: ... handed the very token the other worker held"

# ---- PgBouncer, transaction mode ----------------------------------------------
txn_bouncer pe-bouncer; bport=$BPORT
out=$(drive --dsn "host=127.0.0.1 port=$bport dbname=txn user=$PGUSER" --per-worker pe-bouncer)
diag "PgBouncer (transaction mode, 8 server connections): $out"
is "$(num "$out" entries)" "240" "PgBouncer: 16 workers x 15 critical sections all entered"
[ "$(num "$out" errors)" = 0 ] || diag "$(head -3 "$RP_TMP/pool_exclusion.err")"
is "$(num "$out" overlaps)" "0" "PgBouncer: no entry while another worker was inside"

# ---- the lock-bound guard: only a lease the writing transaction took --------
q "DROP TABLE IF EXISTS pe_account, pe_account_naive" \
  "CREATE TABLE pe_account (id int PRIMARY KEY, balance int NOT NULL, fence_token bigint)" \
  "CREATE TRIGGER zz_fence BEFORE INSERT OR UPDATE OR DELETE ON pe_account FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=pe-acct-{id}', 'xact')" \
  "CREATE TABLE pe_account_naive (LIKE pe_account)" \
  "CREATE TRIGGER zz_fence BEFORE INSERT OR UPDATE OR DELETE ON pe_account_naive FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=pe-acct-{id}')" >/dev/null
# One backend, three requests: A takes a session lease; B, a later
# transaction on the same backend, writes; then C writes in the transaction
# that takes the lease.
out=$(q '\set VERBOSITY sqlstate' "SELECT fence > 0 FROM rp_acquire('pe-acct-1', 30000)" \
	"INSERT INTO pe_account VALUES (1, 0)" 2>&1)
is "$(echo "$out" | tail -1 | sed 's/^.*ERROR: *//')" "RP004" \
	"guard 'xact': a write under a lease an earlier transaction of the backend took is refused (RP004)"
out=$(q '\set VERBOSITY sqlstate' "SELECT fence > 0 FROM rp_acquire('pe-acct-2', 30000)" \
	"INSERT INTO pe_account_naive VALUES (2, 0)" "SELECT count(*) FROM pe_account_naive" 2>&1)
is "$(echo $out)" "t 1" "naive (guard without 'xact'): that write lands"
is "$(q "BEGIN" "SELECT fence > 0 FROM rp_acquire_xact('pe-acct-3', 30000)" "INSERT INTO pe_account VALUES (3, 0)" \
	   "COMMIT" "SELECT count(*) FROM pe_account WHERE id = 3 AND fence_token > 0")" "t
1" "guard 'xact': a write in the transaction that took the lease lands, stamped with its fence"
is "$(q "SELECT count(*) FROM rp_fence_check('pe_account')")" "0" "rp_fence_check accepts the 'xact' option"
q "SELECT rp_release_all()" "DROP TABLE pe_account, pe_account_naive" >/dev/null
finish
