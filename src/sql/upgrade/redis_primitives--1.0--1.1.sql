-- redis_primitives--1.0--1.1.sql
-- ALTER EXTENSION redis_primitives UPDATE TO '1.1' from a 1.0 database.
--
-- Every SQL object that 1.1 adds or changes (in src/sql/*.sql, which build
-- redis_primitives--1.1.sql) is created or replaced here too, so that an
-- updated 1.0 database and a fresh 1.1 install have the same catalog
-- (test/scenarios/upgrade.sh compares them).  Same rules as the install
-- script: every object in @extschema@, every type and operator
-- schema-qualified.  Sections follow the order of src/sql/*.sql.

\echo Use "ALTER EXTENSION redis_primitives UPDATE TO '1.1'" to load this file. \quit

-- ---- lifecycle: pg_dump keeps the fenced store (src/sql/30_fence.sql) ----
-- 1.0 did not mark rp_fenced_store as configuration data, so pg_dump left out
-- its rows (and with them the fences that refuse a stale writer).
SELECT pg_catalog.pg_extension_config_dump('@extschema@.rp_fenced_store', '');

-- observe: rp_stats, rp_stats_reset, rp_stats_info, rp_locks (src/sql/70_observe.sql,
-- 95_observe_grants.sql).  rp_stats_reset stays superuser-only, as in a fresh install.
CREATE FUNCTION @extschema@.rp_stats(
    OUT primitive pg_catalog.text, OUT calls pg_catalog.int8, OUT ok pg_catalog.int8,
    OUT refused pg_catalog.int8, OUT errors pg_catalog.int8,
    OUT errors_08 pg_catalog.int8, OUT errors_53 pg_catalog.int8,
    OUT errors_57 pg_catalog.int8, OUT errors_rp pg_catalog.int8,
    OUT errors_other pg_catalog.int8, OUT timeouts pg_catalog.int8,
    OUT reconnects pg_catalog.int8, OUT noscript pg_catalog.int8,
    OUT total_ms pg_catalog.float8, OUT max_ms pg_catalog.float8,
    OUT shadow_refused pg_catalog.int8)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rp_stats'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.rp_stats() IS
  'Calls of each primitive by every backend and the elector since the last rp_stats_reset(): outcomes, errors by SQLSTATE class, timeouts, reconnects, NOSCRIPT reloads, time';

CREATE VIEW @extschema@.rp_stats AS
  SELECT * FROM @extschema@.rp_stats();
COMMENT ON VIEW @extschema@.rp_stats IS
  'Calls of each primitive: calls = ok + refused + errors; refused = NULL (not acquired, no longer held) or false (refused, not held); shadow_refused = rate limit calls admitted in shadow mode that the limit would have refused (counted in ok)';

CREATE FUNCTION @extschema@.rp_stats_reset()
RETURNS pg_catalog.void
AS 'MODULE_PATHNAME', 'rp_stats_reset'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.rp_stats_reset() IS
  'Set every counter of rp_stats to zero';

CREATE FUNCTION @extschema@.rp_stats_info(
    OUT stats_reset pg_catalog.timestamptz, OUT track pg_catalog.bool,
    OUT locks_capacity pg_catalog.int4, OUT locks_shown pg_catalog.int4,
    OUT locks_not_shown pg_catalog.int8, OUT locks_not_shown_total pg_catalog.int8,
    OUT shmem_bytes pg_catalog.int8)
RETURNS record
AS 'MODULE_PATHNAME', 'rp_stats_info'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.rp_stats_info() IS
  'When rp_stats was reset, whether this session counts, how full rp_locks is, and the shared memory both take';

CREATE VIEW @extschema@.rp_stats_info AS
  SELECT * FROM @extschema@.rp_stats_info();
COMMENT ON VIEW @extschema@.rp_stats_info IS
  'When rp_stats was reset, how full rp_locks is (locks_not_shown: leases held now that the table had no room for), shared memory used';

CREATE FUNCTION @extschema@.rp_locks(
    OUT pid pg_catalog.int4, OUT database pg_catalog.oid, OUT roleid pg_catalog.oid,
    OUT name pg_catalog.text, OUT fence pg_catalog.int8, OUT scope pg_catalog.text,
    OUT acquired_at pg_catalog.timestamptz, OUT expires_at pg_catalog.timestamptz,
    OUT expired pg_catalog.bool)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rp_locks'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.rp_locks() IS
  'Every lease a backend of this server believes it holds';

CREATE VIEW @extschema@.rp_locks AS
  SELECT * FROM @extschema@.rp_locks();
COMMENT ON VIEW @extschema@.rp_locks IS
  'Every lease a backend of this server believes it holds, joinable to pg_stat_activity by pid; expired: its local deadline (expires_at) has passed';

-- Revoke first, then grant, as the install script does (its blanket REVOKE
-- runs before 95_observe_grants.sql), so that the ACLs are identical.
REVOKE ALL ON FUNCTION @extschema@.rp_stats_reset(), @extschema@.rp_stats(),
  @extschema@.rp_locks(), @extschema@.rp_stats_info() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.rp_stats(), @extschema@.rp_locks(),
  @extschema@.rp_stats_info() TO PUBLIC;
GRANT SELECT ON @extschema@.rp_stats, @extschema@.rp_locks,
  @extschema@.rp_stats_info TO PUBLIC;

-- ---------------------------------------------------------------------------
-- Fencing (issue 11): lock- and leader-bound guards, rp_fence_check,
-- rp_fence_floor reading trigger arguments properly, rp_campaign's floor.
-- ---------------------------------------------------------------------------

COMMENT ON FUNCTION @extschema@.rp_fence_guard() IS
  'BEFORE ... FOR EACH ROW trigger, args (column [, options]): options ''error''|''skip'', ''strict'', ''lock=<name template>'', ''leader=<election>''; refuses stale writes (RP001) and writes without a live lease or token (RP004)';

CREATE FUNCTION @extschema@.rp_fence_check(fenced_table pg_catalog.regclass,
                                           OUT trigger_name pg_catalog.text,
                                           OUT problem pg_catalog.text,
                                           OUT hint pg_catalog.text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rp_fence_check'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.rp_fence_check(pg_catalog.regclass) IS
  'Every reason a rp_fence_guard trigger of the table cannot guard it (wrong timing, events, column, options, trigger order); no rows when all can';
REVOKE ALL ON FUNCTION @extschema@.rp_fence_check(pg_catalog.regclass) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.rp_fence_floor(fenced_table pg_catalog.regclass)
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
  -- The guarded column is the first argument of each rp_fence_guard trigger.
  -- tgargs is the arguments, each ended by a zero byte, in the database's
  -- encoding: cut at the first zero byte and decode (never 'escape', which
  -- would mangle a backslash or any non-ASCII character of the name).
  FOR g IN
    SELECT t.tgname, t.tgnargs, t.tgargs
    FROM pg_catalog.pg_trigger AS t
    WHERE t.tgrelid OPERATOR(pg_catalog.=) fenced_table
      AND t.tgfoid OPERATOR(pg_catalog.=) '@extschema@.rp_fence_guard()'::pg_catalog.regprocedure
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

-- rp_campaign gains floor: a new signature, the 3-argument C entry stays.
DROP FUNCTION @extschema@.rp_campaign(pg_catalog.text, pg_catalog.text, pg_catalog.int8);
CREATE FUNCTION @extschema@.rp_campaign(name pg_catalog.text, node_id pg_catalog.text,
                                        lease_ms pg_catalog.int8,
                                        floor pg_catalog.int8 DEFAULT 0)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'rp_campaign'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_campaign(pg_catalog.text, pg_catalog.text, pg_catalog.int8, pg_catalog.int8) IS
  'Become leader of name as node_id for lease_ms (a new epoch above floor), or renew if already leader (same epoch); returns the epoch, NULL when another node or a lock holder has the name';
REVOKE ALL ON FUNCTION @extschema@.rp_campaign(pg_catalog.text, pg_catalog.text, pg_catalog.int8, pg_catalog.int8) FROM PUBLIC;

-- apps: pool-safe forms, rp_release(name, token) and rp_extend(name, token, ttl_ms).

CREATE FUNCTION @extschema@.rp_release(name pg_catalog.text, token pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'rp_release_token'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_release(pg_catalog.text, pg_catalog.text) IS
  'Compare-and-delete by token, from any connection (what a connection pool needs); false when the lease is no longer held with this token';

CREATE FUNCTION @extschema@.rp_extend(name pg_catalog.text, token pg_catalog.text, ttl_ms pg_catalog.int8)
RETURNS @extschema@.rp_lease
AS 'MODULE_PATHNAME', 'rp_extend_token'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_extend(pg_catalog.text, pg_catalog.text, pg_catalog.int8) IS
  'Compare-and-pexpire by token, from any connection: the lease lives ttl_ms from now; NULL if no longer held';
-- As 90_privileges.sql does for every function: EXECUTE is granted by the DBA.
REVOKE ALL ON FUNCTION @extschema@.rp_release(pg_catalog.text, pg_catalog.text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.rp_extend(pg_catalog.text, pg_catalog.text, pg_catalog.int8) FROM PUBLIC;

-- ---- semaphore (src/sql/15_semaphore.sql; issue 19) ----------------------

CREATE FUNCTION @extschema@.rp_semaphore_acquire(name pg_catalog.text, permits pg_catalog.int4,
                                                 ttl_ms pg_catalog.int8,
                                                 wait_ms pg_catalog.int8 DEFAULT 0)
RETURNS @extschema@.rp_lease
AS 'MODULE_PATHNAME', 'rp_semaphore_acquire'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_semaphore_acquire(pg_catalog.text, pg_catalog.int4, pg_catalog.int8, pg_catalog.int8) IS
  'Take one of permits leases on name, waiting in a fair queue up to wait_ms; NULL if not acquired';

CREATE FUNCTION @extschema@.rp_semaphore_acquire_xact(name pg_catalog.text, permits pg_catalog.int4,
                                                      ttl_ms pg_catalog.int8,
                                                      wait_ms pg_catalog.int8 DEFAULT 0)
RETURNS @extschema@.rp_lease
AS 'MODULE_PATHNAME', 'rp_semaphore_acquire_xact'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_semaphore_acquire_xact(pg_catalog.text, pg_catalog.int4, pg_catalog.int8, pg_catalog.int8) IS
  'As rp_semaphore_acquire, released when the transaction ends';

CREATE FUNCTION @extschema@.rp_semaphore_info(name pg_catalog.text,
                                              OUT in_use pg_catalog.int4,
                                              OUT oldest_ttl_ms pg_catalog.int8,
                                              OUT oldest_expires_at pg_catalog.timestamptz,
                                              OUT waiters pg_catalog.int4,
                                              OUT last_fence pg_catalog.int8)
RETURNS record
AS 'MODULE_PATHNAME', 'rp_semaphore_info'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_semaphore_info(pg_catalog.text) IS
  'What Redis holds for a semaphore now: live permits, the time left on the one that expires first, live waiters, the last fence issued; never reveals a token';

REVOKE ALL ON FUNCTION @extschema@.rp_semaphore_acquire(pg_catalog.text, pg_catalog.int4, pg_catalog.int8, pg_catalog.int8) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.rp_semaphore_acquire_xact(pg_catalog.text, pg_catalog.int4, pg_catalog.int8, pg_catalog.int8) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.rp_semaphore_info(pg_catalog.text) FROM PUBLIC;

-- ---- rate-limit shadow mode (src/sql/45_ratelimit_shadow.sql; issue 19) --

-- Shadow mode: the same limits with a last argument, mode ('enforce' or
-- 'shadow'), and rp_ratelimit_consume's record with one more field,
-- would_refuse.  These are overloads with no defaults, so that every call
-- written for 1.0 still resolves to the 1.0 function and gets the 1.0
-- record; docs/ratelimit.md says why.
CREATE FUNCTION @extschema@.rp_ratelimit(key pg_catalog.text, max_requests pg_catalog.int8,
                                         window_ms pg_catalog.int8, cost pg_catalog.int8,
                                         algorithm pg_catalog.text, mode pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'rp_ratelimit'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_ratelimit(pg_catalog.text, pg_catalog.int8, pg_catalog.int8, pg_catalog.int8, pg_catalog.text, pg_catalog.text) IS
  'rp_ratelimit with a mode: ''enforce'' as rp_ratelimit; ''shadow'' admits every request and counts those the limit refuses (rp_ratelimit_shadow_refusals)';

CREATE FUNCTION @extschema@.rp_ratelimit_consume(key pg_catalog.text, max_requests pg_catalog.int8,
                                                 window_ms pg_catalog.int8, cost pg_catalog.int8,
                                                 algorithm pg_catalog.text, mode pg_catalog.text,
                                                 OUT allowed pg_catalog.bool,
                                                 OUT remaining pg_catalog.int8,
                                                 OUT retry_after_ms pg_catalog.int8,
                                                 OUT reset_after_ms pg_catalog.int8,
                                                 OUT would_refuse pg_catalog.bool)
RETURNS record
AS 'MODULE_PATHNAME', 'rp_ratelimit_consume'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_ratelimit_consume(pg_catalog.text, pg_catalog.int8, pg_catalog.int8, pg_catalog.int8, pg_catalog.text, pg_catalog.text) IS
  'rp_ratelimit_consume with a mode, and would_refuse: the limit''s own verdict (in shadow mode allowed is always true and would_refuse says what enforcing would have answered)';

CREATE FUNCTION @extschema@.rp_ratelimit_shadow_refusals(key pg_catalog.text)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'rp_ratelimit_shadow_refusals'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_ratelimit_shadow_refusals(pg_catalog.text) IS
  'How many requests on key the limit refused in shadow mode (and admitted), since rp_ratelimit_reset(key)';

REVOKE ALL ON FUNCTION @extschema@.rp_ratelimit(pg_catalog.text, pg_catalog.int8, pg_catalog.int8, pg_catalog.int8, pg_catalog.text, pg_catalog.text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.rp_ratelimit_consume(pg_catalog.text, pg_catalog.int8, pg_catalog.int8, pg_catalog.int8, pg_catalog.text, pg_catalog.text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.rp_ratelimit_shadow_refusals(pg_catalog.text) FROM PUBLIC;

-- review: rp_is_leader(name) answers false for a configured election the
-- elector has not published yet (it raised 42704 just after server start).
COMMENT ON FUNCTION @extschema@.rp_is_leader(pg_catalog.text) IS
  'This server''s background elector leads name, before its lease deadline; no round trip.  False for a configured election the elector does not run yet; errors for a name not in redis_primitives.elections';
