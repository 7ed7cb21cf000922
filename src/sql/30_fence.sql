-- Fencing, enforced by PostgreSQL.

CREATE FUNCTION @extschema@.rp_fence_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'rp_fence_guard'
LANGUAGE C;
-- #begin fence_guard_comment
COMMENT ON FUNCTION @extschema@.rp_fence_guard() IS
  'BEFORE ... FOR EACH ROW trigger, args (column [, options]): options ''error''|''skip'', ''strict'', ''lock=<name template>'', ''leader=<election>''; refuses stale writes (RP001) and writes without a live lease or token (RP004)';
-- #end fence_guard_comment

-- What is wrong with a table's guards, its partitions' and its inheritance
-- children's: one row per problem, none when every guard can work.
-- #begin fence_check
CREATE FUNCTION @extschema@.rp_fence_check(fenced_table pg_catalog.regclass,
                                           OUT trigger_name pg_catalog.text,
                                           OUT problem pg_catalog.text,
                                           OUT hint pg_catalog.text,
                                           OUT relation pg_catalog.regclass)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rp_fence_check'
LANGUAGE C STABLE PARALLEL SAFE;
-- #begin fence_check_comment
COMMENT ON FUNCTION @extschema@.rp_fence_check(pg_catalog.regclass) IS
  'Every reason a rp_fence_guard trigger of the table, of a partition or of an inheritance child cannot guard it (wrong timing, events, column, options, template column, trigger order, disabled, no copy on a child); relation names the table the problem is on; no rows when all can';
-- #end fence_check_comment
-- #end fence_check

-- The lock name a lock-bound guard binds a row to, rendered as the guard
-- renders it (the same in every session: src/prim/fence_name.c), so that
-- applications take rp_acquire(rp_lock_name('job', j), ttl) rather than
-- rendering the template themselves.
-- #begin lock_name
CREATE FUNCTION @extschema@.rp_lock_name(fenced_table pg_catalog.regclass,
                                         row_value pg_catalog.anyelement,
                                         trigger_name pg_catalog.text DEFAULT NULL)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'rp_lock_name'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.rp_lock_name(pg_catalog.regclass, pg_catalog.anyelement, pg_catalog.text) IS
  'The lock name the table''s lock-bound rp_fence_guard binds a row to (row_value: a row of the table, or a jsonb object of column values), the same in every session: pass it to rp_acquire';
-- #end lock_name


CREATE TABLE @extschema@.rp_fenced_store (
  resource   pg_catalog.text PRIMARY KEY,
  value      pg_catalog.jsonb,
  fence      pg_catalog.int8 NOT NULL,
  updated_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE @extschema@.rp_fenced_store IS
  'A fenced key-value store: a write carrying a lower fence token than the stored one is refused';

-- The store's rows are data, not part of the extension's definition: mark the
-- table so that pg_dump dumps its rows (1.0 did not, and a restore lost every
-- row and every fence with them, letting a stale writer's token in again).
SELECT pg_catalog.pg_extension_config_dump('@extschema@.rp_fenced_store', '');

-- The store is an ordinary fenced table: the same trigger, in 'skip' mode.
CREATE TRIGGER rp_fenced_store_guard
  BEFORE INSERT OR UPDATE ON @extschema@.rp_fenced_store
  FOR EACH ROW EXECUTE FUNCTION @extschema@.rp_fence_guard('fence', 'skip');

-- #begin fenced_write
CREATE FUNCTION @extschema@.rp_fenced_write(resource pg_catalog.text, value pg_catalog.jsonb,
                                            fence pg_catalog.int8)
RETURNS pg_catalog.bool
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  accepted pg_catalog.bool;
BEGIN
  IF resource IS NULL THEN
    RAISE EXCEPTION 'resource must not be NULL' USING ERRCODE = '22004';
  END IF;
  -- By its bytes, as the C functions judge a name: under a nondeterministic
  -- collation '' equals strings that are not empty.
  IF octet_length(resource) = 0 THEN
    RAISE EXCEPTION 'resource must not be empty' USING ERRCODE = '22023';
  END IF;
  IF fence IS NULL THEN
    RAISE EXCEPTION 'fence must not be NULL' USING ERRCODE = '22004';
  END IF;
  IF fence < 0 THEN
    RAISE EXCEPTION 'fence must be between 0 and 9223372036854775807, got %', fence
      USING ERRCODE = '22023',
      HINT = 'Pass the fence token of a lease or permit, or the epoch of an election.';
  END IF;
  INSERT INTO @extschema@.rp_fenced_store AS s (resource, value, fence, updated_at)
  VALUES (resource, value, fence, pg_catalog.clock_timestamp())
  ON CONFLICT ON CONSTRAINT rp_fenced_store_pkey DO UPDATE
    SET value = EXCLUDED.value, fence = EXCLUDED.fence, updated_at = EXCLUDED.updated_at
  RETURNING true INTO accepted;
  RETURN coalesce(accepted, false);
END
$$;
COMMENT ON FUNCTION @extschema@.rp_fenced_write(pg_catalog.text, pg_catalog.jsonb, pg_catalog.int8) IS
  'Write value under resource if fence is not lower than the stored token; false when refused as stale';
-- #end fenced_write

CREATE FUNCTION @extschema@.rp_fenced_read(resource pg_catalog.text,
                                           OUT value pg_catalog.jsonb, OUT fence pg_catalog.int8,
                                           OUT updated_at pg_catalog.timestamptz)
RETURNS record
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  -- NULL must not read as "no such resource".
  IF resource IS NULL THEN
    RAISE EXCEPTION 'resource must not be NULL' USING ERRCODE = '22004';
  END IF;
  SELECT s.value, s.fence, s.updated_at INTO value, fence, updated_at
  FROM @extschema@.rp_fenced_store AS s
  WHERE s.resource OPERATOR(pg_catalog.=) rp_fenced_read.resource;
END
$$;
COMMENT ON FUNCTION @extschema@.rp_fenced_read(pg_catalog.text) IS
  'The fenced value of resource, its fence token and when it was written';

-- The floor the database supplies after a Redis failover.  Replication in
-- Redis is asynchronous: a promoted replica may lack the last increments of a
-- fence counter, and would re-issue tokens the database has already accepted.
-- The highest token a guarded table holds is a floor no lost counter can go
-- under: rp_acquire(name, ttl, floor => rp_fence_floor('my_table')) issues a
-- token above every token any row of that table carries.  The maximum is over
-- the whole table (every lock name that guards rows there): a higher floor
-- only skips numbers, it never re-issues one.  Index the column and this is
-- one index probe.  It reads committed rows: see docs/topology.md for the
-- write still in flight during a failover.
CREATE INDEX rp_fenced_store_fence ON @extschema@.rp_fenced_store (fence);

-- #begin fence_floor
CREATE FUNCTION @extschema@.rp_fence_floor(fenced_table pg_catalog.regclass)
RETURNS pg_catalog.int8
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  g     record;
  col   pg_catalog.text;
  typ   pg_catalog.oid;
  top   pg_catalog.int8;
  floor pg_catalog.int8 := 0;
  found_guard pg_catalog.bool := false;
BEGIN
  IF fenced_table IS NULL THEN
    RAISE EXCEPTION 'fenced_table must not be NULL' USING ERRCODE = '22004';
  END IF;
  -- An OID of no relation (one dropped since it was read, or 0) is not a
  -- table without a guard.
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_class AS c WHERE c.oid OPERATOR(pg_catalog.=) fenced_table) THEN
    RAISE EXCEPTION 'relation with OID % does not exist', fenced_table::pg_catalog.oid
      USING ERRCODE = '42P01';
  END IF;
  -- The guarded column is the first argument of each rp_fence_guard trigger.
  -- tgargs is the arguments, each ended by a zero byte, in the database's
  -- encoding: cut at the first zero byte and decode (never 'escape', which
  -- would mangle a backslash or any non-ASCII character of the name).
  FOR g IN
    SELECT t.tgname, t.tgnargs, t.tgargs
    FROM pg_catalog.pg_trigger AS t
    WHERE t.tgrelid OPERATOR(pg_catalog.=) fenced_table
      -- found in pg_proc, not by a qualified name, which needs USAGE on the
      -- extension's schema: a role may reach this function through a view
      AND t.tgfoid OPERATOR(pg_catalog.=) (SELECT p.oid FROM pg_catalog.pg_proc AS p
        WHERE p.proname OPERATOR(pg_catalog.=) 'rp_fence_guard' AND p.pronargs OPERATOR(pg_catalog.=) 0
          AND p.pronamespace OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace)
  LOOP
    found_guard := true;
    IF g.tgnargs OPERATOR(pg_catalog.<) 1 THEN
      RAISE EXCEPTION 'rp_fence_guard trigger "%" on table % has no column argument', g.tgname, fenced_table
        USING ERRCODE = '39P01',
              HINT = pg_catalog.format('rp_fence_check(%L) lists what is wrong with the table''s guards.', fenced_table);
    END IF;
    col := pg_catalog.convert_from(
             pg_catalog.substring(g.tgargs, 1,
               pg_catalog.position(g.tgargs, '\x00'::pg_catalog.bytea) OPERATOR(pg_catalog.-) 1),
             pg_catalog.getdatabaseencoding());
    SELECT a.atttypid INTO typ
    FROM pg_catalog.pg_attribute AS a
    WHERE a.attrelid OPERATOR(pg_catalog.=) fenced_table
      AND a.attname OPERATOR(pg_catalog.=) col AND NOT a.attisdropped AND a.attnum OPERATOR(pg_catalog.>) 0;
    IF typ IS NULL THEN
      RAISE EXCEPTION 'column "%" of rp_fence_guard trigger "%" does not exist in table %', col, g.tgname, fenced_table
        USING ERRCODE = '42703';
    END IF;
    -- Through domains to the base type.
    WHILE (SELECT t.typtype FROM pg_catalog.pg_type AS t WHERE t.oid OPERATOR(pg_catalog.=) typ) OPERATOR(pg_catalog.=) 'd' LOOP
      SELECT t.typbasetype INTO typ FROM pg_catalog.pg_type AS t WHERE t.oid OPERATOR(pg_catalog.=) typ;
    END LOOP;
    IF typ OPERATOR(pg_catalog.<>) ALL (ARRAY['pg_catalog.int2'::pg_catalog.regtype,
                                             'pg_catalog.int4'::pg_catalog.regtype,
                                             'pg_catalog.int8'::pg_catalog.regtype]::pg_catalog.oid[]) THEN
      RAISE EXCEPTION 'column "%" of rp_fence_guard trigger "%" is %, not an integer type', col, g.tgname,
                      typ::pg_catalog.regtype
        USING ERRCODE = '42804';
    END IF;
    EXECUTE pg_catalog.format('SELECT pg_catalog.max(%I)::pg_catalog.int8 FROM %s', col, fenced_table)
      INTO top;
    floor := GREATEST(floor, COALESCE(top, 0));
  END LOOP;
  IF NOT found_guard THEN
    RAISE EXCEPTION 'table % has no rp_fence_guard trigger', fenced_table
      USING ERRCODE = '22023',
            HINT = 'The floor is the highest fence token a guarded table holds.';
  END IF;
  RETURN floor;
END
$$;
COMMENT ON FUNCTION @extschema@.rp_fence_floor(pg_catalog.regclass) IS
  'Highest fence token the rp_fence_guard-ed table holds: pass it as rp_acquire''s floor so a Redis failover that lost counter increments cannot re-issue a token the table accepted';
-- #end fence_floor

-- CREATE TRIGGER refuses a guard whose template names a generated column or
-- a column whose type has no fixed text, or whose token column is generated
-- (every write would be refused, or guarded under a stale name).
-- #begin guard_created
CREATE FUNCTION @extschema@.rp_fence_guard_created()
RETURNS pg_catalog.event_trigger
AS 'MODULE_PATHNAME', 'rp_fence_guard_created'
LANGUAGE C;
COMMENT ON FUNCTION @extschema@.rp_fence_guard_created() IS
  'Event trigger: refuse a rp_fence_guard trigger whose lock name template or token column can never work (skipped while check_function_bodies is off)';
CREATE EVENT TRIGGER rp_fence_guard_created ON ddl_command_end
  WHEN TAG IN ('CREATE TRIGGER', 'CREATE SCHEMA')
  EXECUTE FUNCTION @extschema@.rp_fence_guard_created();
COMMENT ON EVENT TRIGGER rp_fence_guard_created IS
  'Refuses a rp_fence_guard trigger whose lock name template or token column can never work';
-- #end guard_created
