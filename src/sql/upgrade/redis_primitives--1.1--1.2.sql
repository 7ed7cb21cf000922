-- redis_primitives--1.1--1.2.sql
-- ALTER EXTENSION redis_primitives UPDATE TO '1.2' from a 1.1 database; a
-- 1.0 database gets here through redis_primitives--1.0--1.1.sql first
-- (PostgreSQL chains the two).
--
-- Every SQL object that 1.2 adds or changes (in src/sql/*.sql, which build
-- redis_primitives--1.2.sql) is created or replaced here too, so that an
-- updated 1.0 or 1.1 database and a fresh 1.2 install have the same catalog
-- (test/scenarios/upgrade.sh compares them).  Same rules as the install
-- script: every object in @extschema@, every type and operator
-- schema-qualified.
--
-- Edit src/sql/upgrade/redis_primitives--1.1--1.2.sql: the Makefile builds
-- the shipped script from it with scripts/expand-includes.sh, which replaces
-- each '-- #include FILE [BLOCK]' line by src/sql/FILE (or by its lines
-- between '-- #begin BLOCK' and '-- #end BLOCK'; 'or-replace' turns CREATE
-- FUNCTION into CREATE OR REPLACE, for a function 1.1 already has).  Each
-- definition is written once, in src/sql; written here is only what an
-- update needs and a fresh install does not: DROPs, per-function REVOKEs
-- and GRANTs.

\echo Use "ALTER EXTENSION redis_primitives UPDATE TO '1.2'" to load this file. \quit

-- ---- fence: one lock name per row (src/sql/30_fence.sql) -----------------
-- rp_fence_check reports partitions and inheritance children: its rows gain
-- the relation column, its last OUT argument in src/sql/30_fence.sql.  It is
-- changed in place, not dropped and created: CREATE OR REPLACE cannot change
-- OUT arguments, and a DROP took with it every GRANT a DBA had made on the
-- function (a 1.1 database's monitoring role lost EXECUTE, silently) and
-- failed on any view over it.  Its OUT arguments are its result columns,
-- and nothing else depends on them (regclass and text are pinned types);
-- upgrade.sh checks that the result equals a fresh install's definition.
UPDATE pg_catalog.pg_proc
SET proallargtypes = ARRAY['pg_catalog.regclass'::pg_catalog.regtype, 'pg_catalog.text'::pg_catalog.regtype,
                           'pg_catalog.text'::pg_catalog.regtype, 'pg_catalog.text'::pg_catalog.regtype,
                           'pg_catalog.regclass'::pg_catalog.regtype]::pg_catalog.oid[],
    proargmodes = ARRAY['i', 'o', 'o', 'o', 'o']::pg_catalog."char"[],
    proargnames = ARRAY['fenced_table', 'trigger_name', 'problem', 'hint', 'relation']::pg_catalog.text[]
WHERE oid OPERATOR(pg_catalog.=) '@extschema@.rp_fence_check(pg_catalog.regclass)'::pg_catalog.regprocedure;
-- #include 30_fence.sql fence_check_comment

-- #include 30_fence.sql lock_name
REVOKE ALL ON FUNCTION @extschema@.rp_lock_name(pg_catalog.regclass, pg_catalog.anyelement, pg_catalog.text) FROM PUBLIC;

-- #include 30_fence.sql guard_created
REVOKE ALL ON FUNCTION @extschema@.rp_fence_guard_created() FROM PUBLIC;

-- rp_fence_floor finds rp_fence_guard with no privilege on its schema.
-- #include 30_fence.sql fence_floor or-replace

-- rp_fenced_write refuses an empty resource and a negative fence (22023).
-- #include 30_fence.sql fenced_write or-replace

-- ---- rate limit: shadow counts expire (src/sql/45_ratelimit_shadow.sql) ---
-- #include 45_ratelimit_shadow.sql shadow_refusals_comment
