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
