-- The rate limiter's refusal cache (src/prim/ratecache.c): what it
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
