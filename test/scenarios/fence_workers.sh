#!/usr/bin/env bash
# fence_workers.sh -- 20 workers loop acquire -> read -> work -> write ->
# release on one counter row, with leases short enough that about a third of
# them expire mid-work.
#
# Lock-bound guard (rp_fence_guard('fence_token', 'lock=ctr-{id}')): the
# writer passes no token; a write after its own lease ran out is refused
# (RP004), so no increment is lost: the final counter equals the number of
# accepted writes, and no accepted write carries a token lower than one
# accepted before it.
#
# The naive twin is 1.0's token guard with the writer passing its lease's
# fence: a stale write that lands before the new holder writes is accepted
# (the "honest limit"), and the new holder, which read the same value,
# writes the same increment again: lost updates.  (Half of the naive run's
# rounds are slow, so that a lost update is all but certain: each expiry
# followed by a slow new holder loses one.)
source "$(dirname "$0")/tap.bash"
plan 8
N=20 ROUNDS=3 TTL=300 SHORT=0.03 LONG=0.45

q "DROP TABLE IF EXISTS fw_counter, fw_naive, fw_accepted;
   CREATE TABLE fw_counter (id int PRIMARY KEY, n int NOT NULL, fence_token bigint);
   CREATE TRIGGER fw_fence BEFORE INSERT OR UPDATE OR DELETE ON fw_counter
     FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=ctr-{id}');
   CREATE TABLE fw_naive (id int PRIMARY KEY, n int NOT NULL, fence_token bigint);
   CREATE TRIGGER fw_fence BEFORE INSERT OR UPDATE ON fw_naive
     FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token');
   CREATE TABLE fw_accepted (tbl text, seq bigserial, worker int, n int, fence bigint, expired bool);
   SET session_replication_role = replica;
   INSERT INTO fw_counter VALUES (1, 0, 0);
   INSERT INTO fw_naive VALUES (1, 0, 0);"

# One worker: ROUNDS iterations; a third of them (by random()) work past the
# lease.  Accepted writes are logged in the same statement as the write.
worker() {  # table worker-number slow-fraction
	q "SET redis_primitives.lease_margin = 100" "
	DO \$\$
	DECLARE
	  l rp_lease; v int; slow bool;
	BEGIN
	  FOR r IN 1..$ROUNDS LOOP
	    l := rp_acquire('ctr-1', $TTL, 30000);
	    IF l IS NULL THEN RAISE EXCEPTION 'no lease in 30 s'; END IF;
	    SELECT n INTO v FROM $1 WHERE id = 1;
	    slow := random() < $3;
	    PERFORM pg_sleep(CASE WHEN slow THEN $LONG ELSE $SHORT END);
	    BEGIN
	      IF '$1' = 'fw_counter' THEN
	        WITH u AS (UPDATE fw_counter SET n = v + 1 WHERE id = 1 RETURNING n, fence_token)
	        INSERT INTO fw_accepted (tbl, worker, n, fence, expired)
	          SELECT '$1', $2, u.n, u.fence_token, slow FROM u;
	      ELSE
	        WITH u AS (UPDATE fw_naive SET n = v + 1, fence_token = l.fence WHERE id = 1 RETURNING n, fence_token)
	        INSERT INTO fw_accepted (tbl, worker, n, fence, expired)
	          SELECT '$1', $2, u.n, u.fence_token, slow FROM u;
	      END IF;
	    EXCEPTION WHEN SQLSTATE 'RP004' OR SQLSTATE 'RP001' THEN
	      NULL;
	    END;
	    -- Each round is its own transaction, committed before the release:
	    -- the next holder must read this round's write.
	    COMMIT;
	    PERFORM rp_release(l);
	  END LOOP;
	END \$\$;"
}

run() {  # table slow-fraction
	local i pids=()
	for i in $(seq $N); do worker "$1" "$i" "$2" >"$RP_TMP/fw.$1.$i" 2>&1 & pids+=($!); done
	local rc=0
	for i in "${pids[@]}"; do wait "$i" || rc=1; done
	[ $rc -eq 0 ] || { diag "a worker failed:"; cat "$RP_TMP"/fw."$1".* | head -5 | sed 's/^/# /'; }
	return $rc
}

t0=$(now_ms)
run fw_counter 0.33; ok $? "lock-bound: 20 workers x $ROUNDS rounds ran"
t1=$(now_ms)
accepted=$(q "SELECT count(*) FROM fw_accepted WHERE tbl = 'fw_counter'")
final=$(q "SELECT n FROM fw_counter")
slow_accepted=$(q "SELECT count(*) FROM fw_accepted WHERE tbl = 'fw_counter' AND expired")
diag "lock-bound: $accepted of $((N * ROUNDS)) writes accepted ($slow_accepted of them after a long work), final counter $final, $(( (t1 - t0) / 1000 )) s"
cmp_ok "$accepted" -lt $((N * ROUNDS)) "lock-bound: some writes were refused (leases expired mid-work)"
cmp_ok "$accepted" -ge $((N * ROUNDS / 3)) "lock-bound: most writes were accepted"
is "$slow_accepted" 0 "lock-bound: no write made after its lease expired was accepted"
is "$final" "$accepted" "lock-bound: the final counter equals the number of accepted writes"
is "$(q "SELECT count(*) FROM (SELECT fence < max(fence) OVER (ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS lower
                              FROM fw_accepted WHERE tbl = 'fw_counter') s WHERE lower")" 0 \
	"lock-bound: no accepted write carries a token lower than one accepted before it"

run fw_naive 0.5; ok $? "naive: 20 workers x $ROUNDS rounds ran"
n_accepted=$(q "SELECT count(*) FROM fw_accepted WHERE tbl = 'fw_naive'")
n_final=$(q "SELECT n FROM fw_naive")
diag "naive: $n_accepted writes accepted, final counter $n_final: $((n_accepted - n_final)) increments lost"
cmp_ok "$n_final" -lt "$n_accepted" "naive: stale writes were accepted and increments lost (final counter < accepted writes)"

q "DROP TABLE fw_counter, fw_naive, fw_accepted" >/dev/null
finish
