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
