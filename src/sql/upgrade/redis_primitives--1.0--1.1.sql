-- redis_primitives--1.0--1.1.sql
-- ALTER EXTENSION redis_primitives UPDATE TO '1.1' from a 1.0 database.
--
-- Every SQL object that 1.1 adds or changes (in src/sql/*.sql, which build
-- redis_primitives--1.1.sql) is created or replaced here too, so that an
-- updated 1.0 database and a fresh 1.1 install have the same catalog
-- (test/scenarios/upgrade.sh compares them).  Same rules as the install
-- script: every object in @extschema@, every type and operator
-- schema-qualified.
--
-- Edit src/sql/upgrade/redis_primitives--1.0--1.1.sql: the Makefile builds
-- the shipped script from it with scripts/expand-includes.sh, which replaces
-- each '-- #include FILE [BLOCK]' line by src/sql/FILE (or by its lines
-- between '-- #begin BLOCK' and '-- #end BLOCK'; 'or-replace' turns CREATE
-- FUNCTION into CREATE OR REPLACE, for a function 1.0 already has).  So each
-- definition is written once, in src/sql; written here is only what an
-- update needs and a fresh install does not: DROPs, the per-function REVOKEs
-- (the install script's blanket REVOKE of 90_privileges.sql would also take
-- back EXECUTE a DBA granted to PUBLIC on a 1.0 function),
-- pg_extension_config_dump.

\echo Use "ALTER EXTENSION redis_primitives UPDATE TO '1.1'" to load this file. \quit

-- ---- lifecycle: pg_dump keeps the fenced store (src/sql/30_fence.sql) ----
-- 1.0 did not mark rp_fenced_store as configuration data, so pg_dump left out
-- its rows (and with them the fences that refuse a stale writer).
SELECT pg_catalog.pg_extension_config_dump('@extschema@.rp_fenced_store', '');

-- observe: rp_stats, rp_stats_reset, rp_stats_info, rp_locks (src/sql/70_observe.sql,
-- 95_observe_grants.sql).  rp_stats_reset stays superuser-only, as in a fresh install.
-- #include 70_observe.sql

-- Revoke first, then grant, as the install script does (its blanket REVOKE
-- runs before 95_observe_grants.sql), so that the ACLs are identical.
REVOKE ALL ON FUNCTION @extschema@.rp_stats_reset(), @extschema@.rp_stats(),
  @extschema@.rp_locks(), @extschema@.rp_stats_info() FROM PUBLIC;
-- #include 95_observe_grants.sql

-- ---------------------------------------------------------------------------
-- Fencing: lock- and leader-bound guards, rp_fence_check,
-- rp_fence_floor reading trigger arguments properly, rp_campaign's floor.
-- ---------------------------------------------------------------------------

-- #include 30_fence.sql fence_guard_comment

-- #include 30_fence.sql fence_check
REVOKE ALL ON FUNCTION @extschema@.rp_fence_check(pg_catalog.regclass) FROM PUBLIC;

-- #include 30_fence.sql fence_floor or-replace

-- rp_campaign gains floor: a new signature, the 3-argument C entry stays.
DROP FUNCTION @extschema@.rp_campaign(pg_catalog.text, pg_catalog.text, pg_catalog.int8);
-- #include 50_election.sql campaign
REVOKE ALL ON FUNCTION @extschema@.rp_campaign(pg_catalog.text, pg_catalog.text, pg_catalog.int8, pg_catalog.int8) FROM PUBLIC;

-- apps: pool-safe forms, rp_release(name, token) and rp_extend(name, token, ttl_ms).

-- #include 10_lock.sql token_forms
-- As 90_privileges.sql does for every function: EXECUTE is granted by the DBA.
REVOKE ALL ON FUNCTION @extschema@.rp_release(pg_catalog.text, pg_catalog.text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.rp_extend(pg_catalog.text, pg_catalog.text, pg_catalog.int8) FROM PUBLIC;

-- ---- semaphore (src/sql/15_semaphore.sql) ------------------------------

-- #include 15_semaphore.sql

REVOKE ALL ON FUNCTION @extschema@.rp_semaphore_acquire(pg_catalog.text, pg_catalog.int4, pg_catalog.int8, pg_catalog.int8) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.rp_semaphore_acquire_xact(pg_catalog.text, pg_catalog.int4, pg_catalog.int8, pg_catalog.int8) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.rp_semaphore_info(pg_catalog.text) FROM PUBLIC;

-- ---- rate-limit shadow mode (src/sql/45_ratelimit_shadow.sql) ----------

-- #include 45_ratelimit_shadow.sql

REVOKE ALL ON FUNCTION @extschema@.rp_ratelimit(pg_catalog.text, pg_catalog.int8, pg_catalog.int8, pg_catalog.int8, pg_catalog.text, pg_catalog.text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.rp_ratelimit_consume(pg_catalog.text, pg_catalog.int8, pg_catalog.int8, pg_catalog.int8, pg_catalog.text, pg_catalog.text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.rp_ratelimit_shadow_refusals(pg_catalog.text) FROM PUBLIC;

-- rp_is_leader(name) answers false for a configured election the elector has
-- not published yet (1.0 raised 42704 for it just after server start).
-- #include 50_election.sql is_leader_comment

-- ---- perf: the rate limiter's refusal cache (src/sql/47_ratelimit_cache.sql) ----
-- #include 47_ratelimit_cache.sql
REVOKE ALL ON FUNCTION @extschema@.rp_ratelimit_cache_info() FROM PUBLIC;

-- ---- perf: rp_acquire_all, rp_acquire_all_xact (src/sql/12_lock_all.sql) ----

-- #include 12_lock_all.sql
REVOKE ALL ON FUNCTION @extschema@.rp_acquire_all(pg_catalog.text[], pg_catalog.int8, pg_catalog.int8, pg_catalog.int8) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.rp_acquire_all_xact(pg_catalog.text[], pg_catalog.int8, pg_catalog.int8, pg_catalog.int8) FROM PUBLIC;
