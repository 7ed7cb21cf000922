-- The lease lock.  None of these functions is STRICT: a NULL argument is an
-- error (22004), never a NULL result that would read as "not acquired".

CREATE TYPE @extschema@.rp_lease AS (
  name       pg_catalog.text,
  token      pg_catalog.text,
  fence      pg_catalog.int8,
  expires_at pg_catalog.timestamptz
);
COMMENT ON TYPE @extschema@.rp_lease IS
  'A lease held in Redis: its name, secret token, fence token and the time the holder must stop believing in it';

CREATE FUNCTION @extschema@.rp_acquire(name pg_catalog.text, ttl_ms pg_catalog.int8,
                                       wait_ms pg_catalog.int8 DEFAULT 0,
                                       floor pg_catalog.int8 DEFAULT 0)
RETURNS @extschema@.rp_lease
AS 'MODULE_PATHNAME', 'rp_acquire'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_acquire(pg_catalog.text, pg_catalog.int8, pg_catalog.int8, pg_catalog.int8) IS
  'Take a lease with a fencing token; NULL if not acquired within wait_ms';

CREATE FUNCTION @extschema@.rp_acquire_xact(name pg_catalog.text, ttl_ms pg_catalog.int8,
                                            wait_ms pg_catalog.int8 DEFAULT 0,
                                            floor pg_catalog.int8 DEFAULT 0,
                                            verify_at_commit pg_catalog.bool DEFAULT false)
RETURNS @extschema@.rp_lease
AS 'MODULE_PATHNAME', 'rp_acquire_xact'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_acquire_xact(pg_catalog.text, pg_catalog.int8, pg_catalog.int8, pg_catalog.int8, pg_catalog.bool) IS
  'As rp_acquire, released when the transaction ends; with verify_at_commit, the commit fails (RP002) if the lease was lost';

CREATE FUNCTION @extschema@.rp_release(lease @extschema@.rp_lease)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'rp_release_lease'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_release(@extschema@.rp_lease) IS
  'Compare-and-delete: false when the lease is no longer held with this token';

CREATE FUNCTION @extschema@.rp_release(name pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'rp_release_name'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_release(pg_catalog.text) IS
  'Release the lease this session holds on name; false if it holds none or lost it';

CREATE FUNCTION @extschema@.rp_release_all()
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME', 'rp_release_all'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_release_all() IS
  'Release every lease this session holds; returns how many were still held';

CREATE FUNCTION @extschema@.rp_extend(lease @extschema@.rp_lease, ttl_ms pg_catalog.int8)
RETURNS @extschema@.rp_lease
AS 'MODULE_PATHNAME', 'rp_extend'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_extend(@extschema@.rp_lease, pg_catalog.int8) IS
  'Compare-and-pexpire: the lease lives ttl_ms from now; NULL if no longer held';

CREATE FUNCTION @extschema@.rp_lock_info(name pg_catalog.text,
                                         OUT held pg_catalog.bool, OUT fence pg_catalog.int8,
                                         OUT ttl_ms pg_catalog.int8, OUT last_fence pg_catalog.int8)
RETURNS record
AS 'MODULE_PATHNAME', 'rp_lock_info'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_lock_info(pg_catalog.text) IS
  'What Redis holds for a lock name now; never reveals the token';

CREATE FUNCTION @extschema@.rp_leases()
RETURNS SETOF @extschema@.rp_lease
AS 'MODULE_PATHNAME', 'rp_leases'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_leases() IS
  'The leases this session believes it holds';

-- Pool-safe forms: act by token from any connection (see docs/applications.md).

-- #begin token_forms
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
-- #end token_forms
