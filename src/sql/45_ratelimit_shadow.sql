-- Rate-limit shadow mode.  See docs/ratelimit.md.

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
-- #begin shadow_refusals_comment
COMMENT ON FUNCTION @extschema@.rp_ratelimit_shadow_refusals(pg_catalog.text) IS
  'How many requests on key the limit refused in shadow mode (and admitted), since rp_ratelimit_reset(key) or since the count expired, redis_primitives.ratelimit_shadow_ttl after its last refusal';
-- #end shadow_refusals_comment
