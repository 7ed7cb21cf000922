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
