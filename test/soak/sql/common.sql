-- soak/sql/common.sql -- what both PostgreSQL servers of the soak get: the
-- extension, the audit table and its trigger, the counter-table maker.
-- soak/sql/node1.sql adds the tables only the first server's workers write,
-- soak/sql/leader.sql the leader-bound table both servers have.
--
-- The one thing to know: soak_audit is the checker's view of commit order.
-- Every write the soak makes is an UPDATE of a pre-created row, and an
-- UPDATE holds the row's lock until its transaction ends, so the AFTER ROW
-- trigger's nextval() of two committed writes of the SAME row is taken in
-- the order those transactions committed (the second writer waits on the
-- lock for the first to commit, then runs its triggers).  Across different
-- rows the sequence says nothing, and the checker never compares it there.
-- Aborted writes roll their audit row back with them.
CREATE EXTENSION redis_primitives;

CREATE SEQUENCE soak_audit_seq;
CREATE TABLE soak_audit (
  seq        bigint NOT NULL,
  tbl        text NOT NULL,
  id         text NOT NULL,
  token      bigint,
  old_value  bigint,
  new_value  bigint,
  read_value bigint,
  op_id      text,
  pid        int NOT NULL,
  at         timestamptz NOT NULL
);

-- AFTER UPDATE OR INSERT, arg: the token column.  Sees the row as written,
-- after every BEFORE trigger (the guard stamps the lease's fence there).
-- rp_fenced_store's value is jsonb, not a counter: only the op is kept.
-- search_path: rp_fenced_write runs with pg_catalog only.
CREATE FUNCTION soak_audit() RETURNS trigger LANGUAGE plpgsql
SET search_path = public, pg_catalog AS $$
DECLARE
  n jsonb := to_jsonb(NEW);
  o jsonb := CASE WHEN TG_OP = 'UPDATE' THEN to_jsonb(OLD) END;
BEGIN
  INSERT INTO soak_audit
  VALUES (nextval('soak_audit_seq'), TG_TABLE_NAME,
          coalesce(n->>'id', n->>'resource'),
          (n->>TG_ARGV[0])::bigint,
          CASE jsonb_typeof(o->'value') WHEN 'number' THEN (o->>'value')::bigint END,
          CASE jsonb_typeof(n->'value') WHEN 'number' THEN (n->>'value')::bigint END,
          (n->>'read_value')::bigint,
          coalesce(n->>'op_id', n->'value'->>'op'),
          pg_backend_pid(), clock_timestamp());
  RETURN NULL;
END $$;

-- One counter table per guard mode, and t_naive: the naive twin, a table the
-- same kind of worker writes with the same leases but no guard at all.
CREATE FUNCTION soak_counter_table(tbl text, guard text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('CREATE TABLE %I (id int PRIMARY KEY, value bigint NOT NULL DEFAULT 0,
                  fence_token bigint NOT NULL DEFAULT 0, read_value bigint, op_id text)', tbl);
  EXECUTE format('INSERT INTO %I (id) SELECT generate_series(1, 4)', tbl);
  IF guard IS NOT NULL THEN
    -- Token guards cannot guard DELETE (no token to compare); bound ones do.
    EXECUTE format('CREATE TRIGGER zz_fence BEFORE INSERT OR UPDATE%s ON %I
                    FOR EACH ROW EXECUTE FUNCTION rp_fence_guard(%s)',
                   CASE WHEN guard ~ '''(lock|leader)=' THEN ' OR DELETE' ELSE '' END, tbl, guard);
  END IF;
  EXECUTE format('CREATE TRIGGER soak_audit AFTER INSERT OR UPDATE ON %I
                  FOR EACH ROW EXECUTE FUNCTION soak_audit(''fence_token'')', tbl);
END $$;

