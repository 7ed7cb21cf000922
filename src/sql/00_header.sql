-- redis_primitives--1.2.sql
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
