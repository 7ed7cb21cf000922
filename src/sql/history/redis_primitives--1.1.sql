-- redis_primitives--1.1.sql
-- Assembled by the Makefile from src/sql/*.sql; edit those files.
--
-- Every object is created in @extschema@ and every reference to a type or
-- operator is schema-qualified, so a hostile search_path at CREATE EXTENSION
-- time cannot hijack it.
--
-- The '-- #begin NAME' and '-- #end NAME' lines mark definitions that the
-- upgrade scripts (src/sql/upgrade/) include rather than repeat.

\echo Use "CREATE EXTENSION redis_primitives" to load this file. \quit

CREATE FUNCTION @extschema@.rp_ping(OUT rtt_ms double precision, OUT redis_version text)
RETURNS record
AS 'MODULE_PATHNAME', 'rp_ping'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_ping() IS
  'Round trip to Redis in milliseconds and the server''s version';
-- The lease lock.  None of these functions is STRICT: a NULL argument is an
-- error (22004), never a NULL result that would read as "not acquired".

CREATE TYPE @extschema@.rp_lease AS (
  name       pg_catalog.text,
  token      pg_catalog.text,
  fence      pg_catalog.int8,
  expires_at pg_catalog.timestamptz
);
COMMENT ON TYPE @extschema@.rp_lease IS
  'A lease held in Redis: its name, secret token, fence token and the time the holder must stop believing in it';

CREATE FUNCTION @extschema@.rp_acquire(name pg_catalog.text, ttl_ms pg_catalog.int8,
                                       wait_ms pg_catalog.int8 DEFAULT 0,
                                       floor pg_catalog.int8 DEFAULT 0)
RETURNS @extschema@.rp_lease
AS 'MODULE_PATHNAME', 'rp_acquire'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_acquire(pg_catalog.text, pg_catalog.int8, pg_catalog.int8, pg_catalog.int8) IS
  'Take a lease with a fencing token; NULL if not acquired within wait_ms';

CREATE FUNCTION @extschema@.rp_acquire_xact(name pg_catalog.text, ttl_ms pg_catalog.int8,
                                            wait_ms pg_catalog.int8 DEFAULT 0,
                                            floor pg_catalog.int8 DEFAULT 0,
                                            verify_at_commit pg_catalog.bool DEFAULT false)
RETURNS @extschema@.rp_lease
AS 'MODULE_PATHNAME', 'rp_acquire_xact'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_acquire_xact(pg_catalog.text, pg_catalog.int8, pg_catalog.int8, pg_catalog.int8, pg_catalog.bool) IS
  'As rp_acquire, released when the transaction ends; with verify_at_commit, the commit fails (RP002) if the lease was lost';

CREATE FUNCTION @extschema@.rp_release(lease @extschema@.rp_lease)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'rp_release_lease'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_release(@extschema@.rp_lease) IS
  'Compare-and-delete: false when the lease is no longer held with this token';

CREATE FUNCTION @extschema@.rp_release(name pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'rp_release_name'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_release(pg_catalog.text) IS
  'Release the lease this session holds on name; false if it holds none or lost it';

CREATE FUNCTION @extschema@.rp_release_all()
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME', 'rp_release_all'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_release_all() IS
  'Release every lease this session holds; returns how many were still held';

CREATE FUNCTION @extschema@.rp_extend(lease @extschema@.rp_lease, ttl_ms pg_catalog.int8)
RETURNS @extschema@.rp_lease
AS 'MODULE_PATHNAME', 'rp_extend'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_extend(@extschema@.rp_lease, pg_catalog.int8) IS
  'Compare-and-pexpire: the lease lives ttl_ms from now; NULL if no longer held';

CREATE FUNCTION @extschema@.rp_lock_info(name pg_catalog.text,
                                         OUT held pg_catalog.bool, OUT fence pg_catalog.int8,
                                         OUT ttl_ms pg_catalog.int8, OUT last_fence pg_catalog.int8)
RETURNS record
AS 'MODULE_PATHNAME', 'rp_lock_info'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_lock_info(pg_catalog.text) IS
  'What Redis holds for a lock name now; never reveals the token';

CREATE FUNCTION @extschema@.rp_leases()
RETURNS SETOF @extschema@.rp_lease
AS 'MODULE_PATHNAME', 'rp_leases'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_leases() IS
  'The leases this session believes it holds';

-- Pool-safe forms: act by token from any connection (see docs/applications.md).

-- #begin token_forms
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
-- #end token_forms
-- Many locks in one round trip (issue 17; docs/lock.md): all or nothing,
-- one lease and fence per name, an rp_lease[] in the order of the names,
-- NULL when not acquired within wait_ms.  Not STRICT: a NULL argument is an
-- error (22004), never a NULL result that would read as "not acquired".

CREATE FUNCTION @extschema@.rp_acquire_all(names pg_catalog.text[], ttl_ms pg_catalog.int8,
                                           wait_ms pg_catalog.int8 DEFAULT 0,
                                           floor pg_catalog.int8 DEFAULT 0)
RETURNS @extschema@.rp_lease[]
AS 'MODULE_PATHNAME', 'rp_acquire_all'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_acquire_all(pg_catalog.text[], pg_catalog.int8, pg_catalog.int8, pg_catalog.int8) IS
  'Take a lease on every name or on none, in one Redis round trip; one lease and fence per name, in the order given; NULL if not acquired within wait_ms (nothing is held while waiting)';

CREATE FUNCTION @extschema@.rp_acquire_all_xact(names pg_catalog.text[], ttl_ms pg_catalog.int8,
                                                wait_ms pg_catalog.int8 DEFAULT 0,
                                                floor pg_catalog.int8 DEFAULT 0)
RETURNS @extschema@.rp_lease[]
AS 'MODULE_PATHNAME', 'rp_acquire_all_xact'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_acquire_all_xact(pg_catalog.text[], pg_catalog.int8, pg_catalog.int8, pg_catalog.int8) IS
  'As rp_acquire_all, released when the transaction ends';
-- The semaphore: at most `permits` live leases on a name, each an rp_lease
-- with its own token and a fence from the name's sequence (the lock's).
-- rp_release, rp_extend, rp_release_all and rp_leases take permits as they
-- take locks.  None of these functions is STRICT: a NULL argument is an
-- error (22004), never a NULL result that would read as "not acquired".

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
-- Fencing, enforced by PostgreSQL.

CREATE FUNCTION @extschema@.rp_fence_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'rp_fence_guard'
LANGUAGE C;
-- #begin fence_guard_comment
COMMENT ON FUNCTION @extschema@.rp_fence_guard() IS
  'BEFORE ... FOR EACH ROW trigger, args (column [, options]): options ''error''|''skip'', ''strict'', ''lock=<name template>'', ''leader=<election>''; refuses stale writes (RP001) and writes without a live lease or token (RP004)';
-- #end fence_guard_comment

-- What is wrong with a table's guards: one row per problem, none when every
-- guard can work.
-- #begin fence_check
CREATE FUNCTION @extschema@.rp_fence_check(fenced_table pg_catalog.regclass,
                                           OUT trigger_name pg_catalog.text,
                                           OUT problem pg_catalog.text,
                                           OUT hint pg_catalog.text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rp_fence_check'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.rp_fence_check(pg_catalog.regclass) IS
  'Every reason a rp_fence_guard trigger of the table cannot guard it (wrong timing, events, column, options, trigger order); no rows when all can';
-- #end fence_check

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
  IF fence IS NULL THEN
    RAISE EXCEPTION 'fence must not be NULL' USING ERRCODE = '22004';
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
-- #end fence_floor
-- Rate limiting: one Lua script per call, on Redis' own clock.  None of these
-- functions is STRICT: a NULL argument is an error (22004), never a NULL
-- result.  The fields of the record are defined in docs/ratelimit.md.

CREATE FUNCTION @extschema@.rp_ratelimit(key pg_catalog.text, max_requests pg_catalog.int8,
                                         window_ms pg_catalog.int8,
                                         cost pg_catalog.int8 DEFAULT 1,
                                         algorithm pg_catalog.text DEFAULT 'sliding_log')
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'rp_ratelimit'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_ratelimit(pg_catalog.text, pg_catalog.int8, pg_catalog.int8, pg_catalog.int8, pg_catalog.text) IS
  'Take cost units from key''s allowance of max_requests per window_ms; true if admitted (a refused request records nothing)';

CREATE FUNCTION @extschema@.rp_ratelimit_consume(key pg_catalog.text, max_requests pg_catalog.int8,
                                                 window_ms pg_catalog.int8,
                                                 cost pg_catalog.int8 DEFAULT 1,
                                                 algorithm pg_catalog.text DEFAULT 'sliding_log',
                                                 OUT allowed pg_catalog.bool,
                                                 OUT remaining pg_catalog.int8,
                                                 OUT retry_after_ms pg_catalog.int8,
                                                 OUT reset_after_ms pg_catalog.int8)
RETURNS record
AS 'MODULE_PATHNAME', 'rp_ratelimit_consume'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_ratelimit_consume(pg_catalog.text, pg_catalog.int8, pg_catalog.int8, pg_catalog.int8, pg_catalog.text) IS
  'As rp_ratelimit, with the fields an API needs: units remaining, ms until a retry can succeed (0 if admitted, -1 if never), ms until the allowance is full again';

CREATE FUNCTION @extschema@.rp_ratelimit_peek(key pg_catalog.text, max_requests pg_catalog.int8,
                                              window_ms pg_catalog.int8,
                                              cost pg_catalog.int8 DEFAULT 1,
                                              algorithm pg_catalog.text DEFAULT 'sliding_log',
                                              OUT allowed pg_catalog.bool,
                                              OUT remaining pg_catalog.int8,
                                              OUT retry_after_ms pg_catalog.int8,
                                              OUT reset_after_ms pg_catalog.int8)
RETURNS record
AS 'MODULE_PATHNAME', 'rp_ratelimit_peek'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_ratelimit_peek(pg_catalog.text, pg_catalog.int8, pg_catalog.int8, pg_catalog.int8, pg_catalog.text) IS
  'What rp_ratelimit_consume would answer now, consuming nothing and writing nothing';

CREATE FUNCTION @extschema@.rp_ratelimit_reset(key pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'rp_ratelimit_reset'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_ratelimit_reset(pg_catalog.text) IS
  'Forget key''s state under every algorithm; true if there was any';
-- Rate-limit shadow mode (issue 19).  See docs/ratelimit.md.

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
-- The rate limiter's refusal cache (issue 17, src/ratecache.c): what it
-- holds and how much it answered.  See docs/ratelimit.md.
CREATE FUNCTION @extschema@.rp_ratelimit_cache_info(
    OUT enabled pg_catalog.bool, OUT capacity pg_catalog.int4, OUT live pg_catalog.int4,
    OUT hits pg_catalog.int8, OUT fills pg_catalog.int8, OUT evictions pg_catalog.int8,
    OUT invalidations pg_catalog.int8, OUT skipped_fills pg_catalog.int8)
RETURNS record
AS 'MODULE_PATHNAME', 'rp_ratelimit_cache_info'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.rp_ratelimit_cache_info() IS
  'The rate-limit refusal cache of this server: whether this session uses it, its size, live refusals, calls it answered, refusals stored, evicted, dropped by an admission under other limits or a reset, and stores skipped because one of those raced with them';
-- Leader election.  Leadership is the lock of its name held by a node; the
-- epoch is that holder's token of the name's fence counter, so
-- rp_fenced_write and rp_fence_guard refuse a deposed leader's epoch.  None of these functions is
-- STRICT: a NULL argument is an error (22004), never a NULL result that would
-- read as "not leader".

-- #begin campaign
CREATE FUNCTION @extschema@.rp_campaign(name pg_catalog.text, node_id pg_catalog.text,
                                        lease_ms pg_catalog.int8,
                                        floor pg_catalog.int8 DEFAULT 0)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'rp_campaign'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_campaign(pg_catalog.text, pg_catalog.text, pg_catalog.int8, pg_catalog.int8) IS
  'Become leader of name as node_id for lease_ms (a new epoch above floor), or renew if already leader (same epoch); returns the epoch, NULL when another node or a lock holder has the name';
-- #end campaign

CREATE FUNCTION @extschema@.rp_resign(name pg_catalog.text, node_id pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'rp_resign'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_resign(pg_catalog.text, pg_catalog.text) IS
  'Give up the leadership of name; false when node_id does not lead it';

CREATE FUNCTION @extschema@.rp_is_leader(name pg_catalog.text, node_id pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'rp_is_leader_node'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_is_leader(pg_catalog.text, pg_catalog.text) IS
  'Does node_id lead name, according to Redis now (stale as soon as it returns: carry the epoch)';

CREATE FUNCTION @extschema@.rp_leader(name pg_catalog.text,
                                      OUT node_id pg_catalog.text, OUT epoch pg_catalog.int8,
                                      OUT ttl_ms pg_catalog.int8)
RETURNS record
AS 'MODULE_PATHNAME', 'rp_leader'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_leader(pg_catalog.text) IS
  'Who leads name in Redis now, with its epoch and remaining lease; all NULL when nobody leads';

-- Reads shared memory only, but the answer changes with time: VOLATILE.
CREATE FUNCTION @extschema@.rp_is_leader(name pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'rp_is_leader_local'
LANGUAGE C VOLATILE PARALLEL SAFE;
-- #begin is_leader_comment
COMMENT ON FUNCTION @extschema@.rp_is_leader(pg_catalog.text) IS
  'This server''s background elector leads name, before its lease deadline; no round trip.  False for a configured election the elector does not run yet; errors for a name not in redis_primitives.elections';
-- #end is_leader_comment

CREATE FUNCTION @extschema@.rp_elections(
    OUT name pg_catalog.text, OUT node_id pg_catalog.text, OUT is_leader pg_catalog.bool,
    OUT epoch pg_catalog.int8, OUT leader_since pg_catalog.timestamptz,
    OUT valid_until pg_catalog.timestamptz, OUT last_renewal pg_catalog.timestamptz,
    OUT last_error pg_catalog.text, OUT state pg_catalog.text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rp_elections_list'
LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.rp_elections() IS
  'Every election of this server''s background elector.  is_leader is the deadline-bounded belief; state is the elector''s own last view, which a stalled elector cannot update: never gate on state';
-- Topology diagnostics.

CREATE FUNCTION @extschema@.rp_key_slot(key pg_catalog.text)
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME', 'rp_key_slot_sql'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.rp_key_slot(pg_catalog.text) IS
  'The Redis Cluster hash slot of a key, as CLUSTER KEYSLOT computes it (CRC16 of its hash tag)';
-- Seeing what it does: rp_stats, rp_locks, rp_stats_info (shared memory;
-- need redis_primitives in shared_preload_libraries).  Readable by every
-- role (granted in 95_observe_grants.sql, after the blanket REVOKE):
-- rp_stats holds counts only, and rp_locks shows a role only the leases of
-- roles whose privileges it has, unless it has pg_read_all_stats, as
-- pg_stat_activity does.  rp_stats_reset() is for superusers, to be granted.

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
-- Privileges.  These functions reach an external service, hold state other
-- roles depend on (leases, rate-limit counters, leadership) and can consume
-- Redis memory, so nothing is granted to PUBLIC: the DBA grants EXECUTE to
-- the roles that need it (docs/security.md has a ready GRANT block).  The
-- one exception is the trigger function: a trigger runs with the privileges
-- of whoever writes the row, and creating one already requires owning the
-- table.  The fenced store is readable and writable only through grants.
DO $$
DECLARE
  f pg_catalog.regprocedure;
BEGIN
  FOR f IN
    SELECT d.objid::pg_catalog.regprocedure
    FROM pg_catalog.pg_depend d
    JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
    WHERE e.extname OPERATOR(pg_catalog.=) 'redis_primitives'
      AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
      AND d.deptype OPERATOR(pg_catalog.=) 'e'
      AND d.objid::pg_catalog.regprocedure OPERATOR(pg_catalog.<>)
          '@extschema@.rp_fence_guard()'::pg_catalog.regprocedure
  LOOP
    EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
  END LOOP;
END
$$;

REVOKE ALL ON TABLE @extschema@.rp_fenced_store FROM PUBLIC;
-- Monitoring views are readable by every role (after 90_privileges.sql's
-- blanket REVOKE): see 70_observe.sql for what each role sees.
GRANT EXECUTE ON FUNCTION @extschema@.rp_stats(), @extschema@.rp_locks(),
  @extschema@.rp_stats_info() TO PUBLIC;
GRANT SELECT ON @extschema@.rp_stats, @extschema@.rp_locks,
  @extschema@.rp_stats_info TO PUBLIC;
