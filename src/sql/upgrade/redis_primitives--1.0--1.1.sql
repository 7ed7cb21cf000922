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
