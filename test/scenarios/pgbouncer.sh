#!/usr/bin/env bash
# pgbouncer.sh -- leases through a real PgBouncer (Debian's package).
#
# Behind a pool the backend is not the client.  Transaction pooling hands the
# same backend to whichever client sends the next transaction: a session
# lease (rp_acquire) left by one client is inherited by the next one, which
# can list it and release it.  So for a transaction-pooled role the
# administrator sets redis_primitives.session_leases = off and rp_acquire
# (and rp_semaphore_acquire, whose permit the session holds too) fails
# loudly; rp_acquire_xact inside a transaction, with the fence guard, works
# unchanged.  Session pooling keeps the backend alive when the client
# disconnects, so backend-exit release does not happen; server_reset_query =
# DISCARD ALL (PgBouncer's default) releases the session's leases instead.
# Each pool has one server connection, so "the next client" provably gets the
# same backend.
source "$(dirname "$0")/tap.bash"
source "$(dirname "$0")/../../scripts/lib.sh"
plan 20

command -v pgbouncer >/dev/null || { echo "not ok 1 - pgbouncer is not installed (RP_PACKAGES)"; exit 1; }

# Roles: "naive" connects through transaction pooling as 1.0 allowed; "pooled"
# is the same role with what docs/applications.md tells the administrator to set.
q "DROP ROLE IF EXISTS naive" "DROP ROLE IF EXISTS pooled" \
  "CREATE ROLE naive LOGIN" "CREATE ROLE pooled LOGIN" \
  "ALTER ROLE pooled SET redis_primitives.session_leases = off" \
  "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO naive, pooled" \
  "DROP TABLE IF EXISTS pgb_account" \
  "CREATE TABLE pgb_account (id int PRIMARY KEY, balance int NOT NULL, fence_token bigint NOT NULL DEFAULT 0)" \
  "CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON pgb_account FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token')" \
  "INSERT INTO pgb_account VALUES (1, 0, 0)" \
  "GRANT SELECT, UPDATE ON pgb_account TO naive, pooled" >/dev/null

BOUNCERS=()
start_bouncer() {  # name reset_query : sets BPORT
	local name=$1 port; port=$(rp_free_port)
	printf '"naive" ""\n"pooled" ""\n"postgres" ""\n' >"$RP_TMP/$name.users"
	cat >"$RP_TMP/$name.ini" <<INI
[databases]
txn = host=$RP_TMP port=$PGPORT dbname=$RP_DB pool_mode=transaction pool_size=1
sess = host=$RP_TMP port=$PGPORT dbname=$RP_DB pool_mode=session pool_size=1
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $RP_TMP/$name.users
server_reset_query = $2
logfile = $RP_TMP/$name.log
pidfile = $RP_TMP/$name.pid
INI
	chmod a+r "$RP_TMP/$name.ini" "$RP_TMP/$name.users"
	rp_as_pg pgbouncer -d -q "$RP_TMP/$name.ini" || { cat "$RP_TMP/$name.log" >&2; return 1; }
	BOUNCERS+=("$RP_TMP/$name.pid")
	wait_for 30 "rp_port_taken $port"  # a start on a loaded machine: seconds
	BPORT=$port
}
stop_bouncers() { local f; for f in "${BOUNCERS[@]}"; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null; done; }
# The roles are the server's, not rp_test's: the next file on these servers
# must not find them.
trap 'stop_bouncers; q "DROP OWNED BY naive, pooled" "DROP ROLE naive" "DROP ROLE pooled" >/dev/null' EXIT

start_bouncer pgb 'DISCARD ALL'; bport=$BPORT
# through the bouncer: user db SQL...  (errors shown as "ERROR:  <SQLSTATE>")
bq() {
	local user=$1 db=$2; shift 2
	local args=() s
	for s in "$@"; do args+=(-c "$s"); done
	psql -X -At -q -h 127.0.0.1 -p "$bport" -U "$user" -d "$db" -v VERBOSITY=sqlstate "${args[@]}" 2>&1
}
held() { q "SELECT (rp_lock_info('$1')).held"; }

# ---- transaction pooling: what works ------------------------------------
out=$(bq pooled txn "BEGIN" "SELECT fence > 0 FROM rp_acquire_xact('pgb-x', 30000)" \
      "SELECT (rp_lock_info('pgb-x')).held" "COMMIT")
is "$(echo $out)" "t t" "transaction pooling: rp_acquire_xact inside a transaction holds the lease"
is "$(held pgb-x)" "f" "... and it is released at COMMIT"

# The fenced write in one transaction (one round trip): lease, guarded UPDATE, commit.
fenced_sql="WITH l AS (SELECT * FROM rp_acquire_xact('account-1', 30000))
  UPDATE pgb_account a SET balance = balance + 1, fence_token = l.fence FROM l WHERE a.id = 1 RETURNING l.fence"
f1=$(bq pooled txn "$fenced_sql")
f2=$(bq pooled txn "$fenced_sql")
cmp_ok "${f2:-0}" -gt "${f1:-0}" "two fenced read-modify-writes through the pool, each with a new fence ($f1, $f2)"
is "$(q "SELECT balance || ' ' || fence_token FROM pgb_account WHERE id = 1")" "2 $f2" "both increments landed, the row carries the last fence"
is "$(bq pooled txn "UPDATE pgb_account SET balance = 99, fence_token = $f1 WHERE id = 1")" "ERROR:  RP001" \
	"a stale token through the pool is refused by the guard (RP001)"

# ---- transaction pooling: session leases are inherited (the naive twin) ---
pid_a=$(bq naive txn "SELECT pg_backend_pid()")
tok=$(bq naive txn "SELECT token FROM rp_acquire('pgb-s', 60000)")
# client A has disconnected; client B gets the same backend
pid_b=$(bq naive txn "SELECT pg_backend_pid()")
is "$pid_b" "$pid_a" "(one server connection: client B is handed client A's backend)"
is "$(bq naive txn "SELECT count(*) FROM rp_leases() WHERE token = '$tok'")" "1" \
	"naive: a later client sees the session lease an earlier client left behind"
is "$(bq naive txn "SELECT rp_release('pgb-s')")" "t" "naive: ... and can release it, though it never acquired it"
# The loud form: session leases off for the pooled role.
out=$(psql -X -At -q -h 127.0.0.1 -p "$bport" -U pooled -d txn -c "SELECT rp_acquire('pgb-s', 60000)" 2>&1)
ok $(echo "$out" | grep -q 'session leases are disabled' && echo "$out" | grep -q 'HINT:.*rp_acquire_xact'; echo $?) \
	"session_leases = off for the pooled role: rp_acquire fails with an error and a hint"
is "$(held pgb-s)" "f" "... and took nothing in Redis"
is "$(bq pooled txn "SELECT rp_release('pgb-s', '$tok')")" "f" \
	"rp_release(name, token) through the pool answers for the token alone (already released: false)"
# A semaphore's permit is the session's as a lease is: the same hazard, the
# same refusal.
stok=$(bq naive txn "SELECT token FROM rp_semaphore_acquire('pgb-sem', 2, 60000)")
is "$(bq naive txn "SELECT count(*) FROM rp_leases() WHERE token = '$stok'")" "1" \
	"naive: a later client holds the session permit an earlier client took"
bq naive txn "SELECT rp_release_all()" >/dev/null
out=$(psql -X -At -q -h 127.0.0.1 -p "$bport" -U pooled -d txn -c "SELECT rp_semaphore_acquire('pgb-sem', 2, 60000)" 2>&1)
ok $(echo "$out" | grep -q 'session permits are disabled' && echo "$out" | grep -q 'HINT:.*rp_semaphore_acquire_xact'; echo $?) \
	"session_leases = off for the pooled role: rp_semaphore_acquire fails with an error and a hint"
is "$(q "SELECT in_use FROM rp_semaphore_info('pgb-sem')")" "0" "... and took no permit in Redis"
out=$(bq pooled txn "BEGIN" "SELECT fence > 0 FROM rp_semaphore_acquire_xact('pgb-sem', 2, 30000)" \
      "SELECT in_use FROM rp_semaphore_info('pgb-sem')" "COMMIT")
is "$(echo $out) $(q "SELECT in_use FROM rp_semaphore_info('pgb-sem')")" "t 1 0" \
	"rp_semaphore_acquire_xact through the pool holds a permit for its transaction, released at COMMIT"

# ---- session pooling ------------------------------------------------------
# A client disconnects without releasing; the server connection lives on.
bq naive sess "SELECT fence > 0 FROM rp_acquire('pgb-sess', 60000)" >/dev/null
wait_for 30 '[ "$(held pgb-sess)" = f ]'  # the reset runs after the disconnect, when the bouncer gets to it
is "$(held pgb-sess)" "f" "session pooling with server_reset_query = DISCARD ALL: the lease is released at client disconnect"
is "$(bq naive sess "SELECT count(*) FROM rp_leases()")" "0" "... and the next client on that backend inherits nothing"

# The naive twin: a bouncer without the reset query keeps the lease (and the
# backend) alive after the client left; only the TTL ends it.
bport_keep=$bport
start_bouncer plain ''; bport=$BPORT
pid1=$(bq naive sess "SELECT pg_backend_pid() FROM rp_acquire('pgb-plain', 60000)")
sleep 1
is "$(held pgb-plain)" "t" "naive: without the reset query the lease outlives the client that disconnected"
is "$(q "SELECT count(*) FROM pg_stat_activity WHERE pid = ${pid1:-0}")" "1" \
	"naive: ... because its backend lives on in the pool (backend-exit release cannot happen)"
is "$(bq naive sess "SELECT count(*) FROM rp_leases()")" "1" "naive: the next client inherits it"
bq naive sess "SELECT rp_release_all()" >/dev/null
bport=$bport_keep
finish
