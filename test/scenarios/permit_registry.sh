#!/usr/bin/env bash
# permit_registry.sh -- the registry of one session's permits of a semaphore.
#
# A session may hold several permits of one semaphore, one per transaction
# that took one.  What is checked here, against Redis' own count: a permit
# the transaction took and Redis no longer holds is forgotten when the
# transaction asks again inside lease_margin (the re-entry's extend finds it
# gone), so asking again takes one new permit, not one per call; more
# permits than the registry sweeps at (64), released by name, by token, all
# at once and at exit; expired ones swept; a lock and a semaphore of one
# name; a savepoint's permit rolled back and taken again.
source "$(dirname "$0")/tap.bash"
plan 13

info() { q "SELECT $2 FROM rp_semaphore_info('$1')"; }
inxacts() {  # name count ttl: take count permits, each in a transaction of its own
	local cmds=() i
	for ((i = 0; i < $2; i++)); do cmds+=("SELECT fence > 0 FROM rp_semaphore_acquire('$1', 1000, $3)"); done
	q "${cmds[@]}" "SELECT count(*) FROM rp_leases() WHERE name = '$1'" | tail -1
}

# ---- a lost permit, asked for again inside lease_margin --------------------------
# lease_margin above the ttl: every re-entry first extends the permit in Redis.
out=$(q "SET redis_primitives.lease_margin = '1h'" "BEGIN" \
	"CREATE TEMP TABLE t AS SELECT token FROM rp_semaphore_acquire_xact('pr-lost', 10, 60000)" \
	"SELECT rp_test.redis('ZREM', rp_test.key('pr-lost', 'sem'), token) FROM t" \
	"SELECT count(DISTINCT token) FROM (SELECT (rp_semaphore_acquire_xact('pr-lost', 10, 60000)).token FROM generate_series(1, 3)) s" \
	"SELECT token FROM rp_semaphore_acquire_xact('pr-lost', 10, 60000)" \
	"SELECT token FROM rp_semaphore_acquire_xact('pr-lost', 10, 60000)" \
	"SELECT in_use FROM rp_semaphore_info('pr-lost')" \
	"SELECT count(*) FROM rp_leases() WHERE name = 'pr-lost'" "COMMIT" \
	"SELECT in_use FROM rp_semaphore_info('pr-lost')" 2>&1)
set -- $out x x x x x x x x
is "$2 $([ "$3" = "$4" ] && echo same || echo differ) $5 $6 $7" "1 same 1 1 0" \
	"a permit Redis lost, asked for again 3 times inside lease_margin: one new permit handed back each time (1 token, 1 in use, 1 listed, 0 after COMMIT)"

out=$(q "SET redis_primitives.lease_margin = '1h'" "BEGIN" \
	"SELECT rp_test.redis('DEL', rp_test.key('pr-lost', 'lock')) FROM rp_acquire_xact('pr-lost', 60000)" \
	"SELECT count(DISTINCT token) FROM (SELECT (rp_acquire_xact('pr-lost', 60000)).token FROM generate_series(1, 3)) s" \
	"SELECT count(*) FROM rp_leases() WHERE name = 'pr-lost'" "COMMIT" 2>&1)
is "$(echo $out)" "1 1 1" "a lock Redis lost, asked for again 3 times inside lease_margin: one new lock, the lost one forgotten"

# ---- more permits than the sweep threshold ---------------------------------------
is "$(inxacts pr-many 70 60000)" "70" "70 transactions of one session: 70 permits listed"
wait_for 30 '[ "$(info pr-many in_use)" = 0 ]'
is "$(info pr-many in_use)" "0" "... and every one released at that session's exit"
is "$(q "SELECT count(*) FROM rp_leases()")" "0" "a new session lists none"

# (one command: one transaction, one permit; take them in transactions of their own)
cmds=(); for i in $(seq 70); do cmds+=("SELECT 1 FROM rp_semaphore_acquire('pr-rel', 1000, 60000)"); done
out=$(q "${cmds[@]}" \
	"CREATE TEMP TABLE o AS SELECT token, row_number() OVER () n FROM rp_leases() WHERE name = 'pr-rel'" \
	"SELECT rp_release('pr-rel', token) FROM o WHERE n = 1" \
	"SELECT rp_release('pr-rel')" "SELECT rp_release('pr-rel')" \
	"SELECT count(*) FROM rp_leases() WHERE name = 'pr-rel'" \
	"SELECT in_use FROM rp_semaphore_info('pr-rel')" \
	"SELECT count(*) FROM o JOIN rp_leases() USING (token) WHERE n IN (1, 69, 70)" \
	"SELECT rp_release_all()" "SELECT count(*) FROM rp_leases()" \
	"SELECT in_use FROM rp_semaphore_info('pr-rel')" 2>&1 | tail -9)
is "$(echo $out)" "t t t 67 67 0 67 0 0" \
	"70 permits: by token the oldest, by name the two newest (67 left in Redis and listed), rp_release_all the rest"

# ---- expired permits swept past 64 -----------------------------------------------
out=$(q "${cmds[@]//60000/300}" \
	"SELECT pg_sleep(0.5)" \
	"SELECT fence > 0 FROM rp_semaphore_acquire('pr-sweep', 1000, 60000)" \
	"SELECT count(*) FROM rp_leases()" "SELECT count(*) FROM rp_leases() WHERE name = 'pr-rel'" 2>&1 | tail -3)
is "$(echo $out)" "t 1 0" "70 permits past their deadline are swept: only the live one is listed"
q "SELECT rp_release_all()" >/dev/null

# ---- a lock and a semaphore of one name ------------------------------------------
out=$(q "SELECT fence > 0 FROM rp_acquire('pr-dual', 60000)" \
	"SELECT fence > 0 FROM rp_semaphore_acquire('pr-dual', 2, 60000)" \
	"SELECT fence > 0 FROM rp_semaphore_acquire('pr-dual', 2, 60000)" \
	"SELECT rp_release('pr-dual')" \
	"SELECT rp_test.redis('EXISTS', rp_test.key('pr-dual', 'lock')) || ' ' || in_use FROM rp_semaphore_info('pr-dual')" \
	"SELECT rp_release('pr-dual')" "SELECT rp_release('pr-dual')" \
	"SELECT count(*) || ' ' || (SELECT in_use FROM rp_semaphore_info('pr-dual')) FROM rp_leases()" 2>&1)
is "$(echo $out)" "t t t t 0 2 t t 0 0" "a lock and two permits of one name: rp_release(name) takes the lock first, then the permits"

# ---- savepoints --------------------------------------------------------------------
out=$(q "BEGIN" "SAVEPOINT a" "CREATE TEMP TABLE s AS SELECT token FROM rp_semaphore_acquire_xact('pr-sp', 5, 60000)" \
	"ROLLBACK TO SAVEPOINT a" \
	"SELECT in_use FROM rp_semaphore_info('pr-sp')" \
	"SELECT count(*) FROM rp_leases() WHERE name = 'pr-sp'" \
	"SAVEPOINT b" "SELECT fence > 0 FROM rp_semaphore_acquire_xact('pr-sp', 5, 60000)" "RELEASE SAVEPOINT b" \
	"SELECT fence > 0 FROM rp_semaphore_acquire_xact('pr-sp', 5, 60000)" \
	"SELECT in_use FROM rp_semaphore_info('pr-sp')" \
	"COMMIT" "SELECT in_use FROM rp_semaphore_info('pr-sp')" "SELECT count(*) FROM rp_leases()" 2>&1)
is "$(echo $out)" "0 0 t t 1 0 0" "a savepoint's permit rolled back is gone; one taken again, re-entered, ended at COMMIT"

# ---- a guarded write under one permit, another permit of the name taken after it ----
# The commit check asks for the permit the write was made under: the later
# permit, with the later deadline, does not end it.
q "SET client_min_messages = warning" "DROP TABLE IF EXISTS pr_row" "CREATE TABLE pr_row (id int, fence_token bigint)" \
	"CREATE TRIGGER g BEFORE INSERT OR UPDATE OR DELETE ON pr_row FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=pr-row-{id}')" >/dev/null
out=$(q "CREATE TEMP TABLE first AS SELECT fence FROM rp_semaphore_acquire('pr-row-1', 3, 60000)" \
	"BEGIN" "INSERT INTO pr_row VALUES (1, NULL)" \
	"SELECT fence > (SELECT fence FROM first) FROM rp_semaphore_acquire('pr-row-1', 3, 120000)" "COMMIT" \
	"SELECT count(*) FROM pr_row WHERE fence_token = (SELECT fence FROM first)" "SELECT rp_release_all()" 2>&1)
is "$(echo $out)" "t 1 2" "a write under a live permit commits after a second permit of the name is taken"
q "DROP TABLE pr_row" >/dev/null

# ---- exit with a lock and many permits held -----------------------------------------
q "SELECT fence > 0 FROM rp_acquire('pr-exit', 60000)" "${cmds[@]//pr-rel/pr-exit}" >/dev/null
wait_for 30 '[ "$(info pr-exit in_use)" = 0 ]'
is "$(info pr-exit in_use) $(q "SELECT rp_test.redis('EXISTS', rp_test.key('pr-exit', 'lock'))")" "0 0" \
	"exit with a lock and 70 permits of one name: Redis holds none"
is "$(q "SELECT count(*) FROM rp_locks WHERE name = 'pr-exit'")" "0" "rp_locks lists none of them"
is "$(q "SELECT count(*) FROM rp_leases()")" "0" "and a new session lists none"
finish
