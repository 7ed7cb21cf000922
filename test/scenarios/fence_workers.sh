#!/usr/bin/env bash
# fence_workers.sh -- 20 workers loop acquire -> read -> work -> write ->
# release on one counter row; a third of the rounds work past their lease.
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
# writes the same increment again: lost updates.
#
# The race is pinned, not left to the machine's speed: a round that works
# past its lease (TTL 300 ms) works until Redis shows that another worker
# took the lease (or, when no other worker is left, until the lease is gone),
# then writes; a stale write that was accepted holds its transaction open
# until the next holder's write waits on its row lock (pg_blocking_pids),
# so the next holder read the row before the stale write committed.  And
# the next holder writes only once every round its lease superseded has
# made its write (or had it refused): else a stale worker descheduled for
# longer than the next holder's round wrote after it, and the token guard
# refused it (a 1.5 s stall there: naive '46 < 46', no increment lost).  The
# other rounds have 5 s leases, far longer than a round takes at load 50.  Each
# worker's application_name carries the fence of the lease it holds, and
# -s while it works past it and has not yet written, -w while it holds an
# accepted stale write open.
source "$(dirname "$0")/tap.bash"
plan 8
N=20 ROUNDS=3 TTL=300 LONG_TTL=5000 SHORT=0.03

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

# One worker: ROUNDS iterations; a third of them (never a worker's last)
# work past the lease.  Accepted writes are logged in the same statement as
# the write.  Each wait gives up after 30 s (the checks then see it); the
# next holder's wait for a stale write fails its worker.  A worker waits
# up to 120 s for the lease: 20 workers queue for it (both runs took
# 59 s at load 15 with stalls injected), so 30 s could run out.
worker() {  # table worker-number
	q "SET redis_primitives.lease_margin = 100" "SET application_name = 'fw-0'" "
	-- the other workers still running; with false, not those holding a
	-- stale write open (application_name fw-FENCE-w)
	CREATE FUNCTION pg_temp.others(holding_too bool) RETURNS bigint LANGUAGE sql AS
	  \$\$ SELECT pg_stat_clear_snapshot(); SELECT count(*) FROM pg_stat_activity
	       WHERE application_name LIKE 'fw-%' AND pid <> pg_backend_pid()
	         AND (holding_too OR application_name NOT LIKE '%-w') \$\$" "
	-- the workers whose lease a lower fence than this one named, still
	-- working past it (application_name fw-FENCE-s) and not yet waiting on
	-- the row for their write
	CREATE FUNCTION pg_temp.unwritten(below bigint) RETURNS bigint LANGUAGE sql AS
	  \$\$ SELECT pg_stat_clear_snapshot(); SELECT count(*) FROM pg_stat_activity
	       WHERE application_name ~ '^fw-[0-9]+-s\$'
	         AND split_part(application_name, '-', 2)::bigint < below
	         AND cardinality(pg_blocking_pids(pid)) = 0 \$\$" "
	DO \$\$
	DECLARE
	  l rp_lease; v int; slow bool; i record; t0 timestamptz; t1 timestamptz;
	BEGIN
	  FOR r IN 1..$ROUNDS LOOP
	    slow := r < $ROUNDS AND ($2 + r) % 3 = 0;
	    l := rp_acquire('ctr-1', CASE WHEN slow THEN $TTL ELSE $LONG_TTL END, 120000);
	    IF l IS NULL THEN RAISE EXCEPTION 'no lease in 120 s'; END IF;
	    PERFORM set_config('application_name', 'fw-' || l.fence, false);
	    SELECT n INTO v FROM $1 WHERE id = 1;
	    t0 := clock_timestamp();
	    IF slow THEN
	      -- work until another worker took the lease, or it is gone and no
	      -- other worker can take it
	      PERFORM set_config('application_name', 'fw-' || l.fence || '-s', false);
	      LOOP
	        i := rp_lock_info('ctr-1');
	        EXIT WHEN i.last_fence > l.fence OR (NOT i.held AND pg_temp.others(false) = 0)
	               OR clock_timestamp() > t0 + interval '30 s';
	        PERFORM pg_sleep(0.01);
	      END LOOP;
	    ELSE
	      PERFORM pg_sleep($SHORT);
	    END IF;
	    -- the stale rounds this lease superseded write first
	    t1 := clock_timestamp();
	    WHILE pg_temp.unwritten(l.fence) > 0 LOOP
	      IF clock_timestamp() > t1 + interval '30 s' THEN
	        RAISE EXCEPTION 'a stale round did not write in 30 s';
	      END IF;
	      PERFORM pg_sleep(0.01);
	    END LOOP;
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
	      -- A stale write that was accepted commits once the next holder's
	      -- write waits on its row (or no other worker is left).
	      IF slow THEN
	        PERFORM set_config('application_name', 'fw-' || l.fence || '-w', false);
	        WHILE clock_timestamp() < t0 + interval '60 s' AND pg_temp.others(true) > 0
	              AND NOT EXISTS (SELECT FROM pg_stat_activity a
	                              WHERE a.application_name ~ '^fw-[0-9]+(-s)?\$'
	                                AND split_part(a.application_name, '-', 2)::bigint > l.fence
	                                AND pg_backend_pid() = ANY (pg_blocking_pids(a.pid))) LOOP
	          PERFORM pg_sleep(0.01);
	        END LOOP;
	        PERFORM set_config('application_name', 'fw-' || l.fence, false);
	      END IF;
	    EXCEPTION WHEN SQLSTATE 'RP004' OR SQLSTATE 'RP001' THEN
	      -- the block's rollback put back -s
	      PERFORM set_config('application_name', 'fw-' || l.fence, false);
	    END;
	    -- Each round is its own transaction, committed before the release:
	    -- the next holder must read this round's write.
	    COMMIT;
	    PERFORM rp_release(l);
	  END LOOP;
	END \$\$;"
}

run() {  # table
	local i pids=()
	for i in $(seq $N); do worker "$1" "$i" >"$RP_TMP/fw.$1.$i" 2>&1 & pids+=($!); done
	local rc=0
	for i in "${pids[@]}"; do wait "$i" || rc=1; done
	[ $rc -eq 0 ] || { diag "a worker failed:"; cat "$RP_TMP"/fw."$1".* | head -5 | sed 's/^/# /'; }
	return $rc
}

t0=$(now_ms)
run fw_counter; ok $? "lock-bound: 20 workers x $ROUNDS rounds ran"
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

run fw_naive; ok $? "naive: 20 workers x $ROUNDS rounds ran"
n_accepted=$(q "SELECT count(*) FROM fw_accepted WHERE tbl = 'fw_naive'")
n_final=$(q "SELECT n FROM fw_naive")
diag "naive: $n_accepted writes accepted, final counter $n_final: $((n_accepted - n_final)) increments lost"
cmp_ok "$n_final" -lt "$n_accepted" "naive: stale writes were accepted and increments lost (final counter < accepted writes)"

q "DROP TABLE fw_counter, fw_naive, fw_accepted" >/dev/null
finish
