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
