-- The semaphore: at most `permits` live leases on a name, each an rp_lease
-- with its own token and a fence from the name's sequence (the lock's).
-- rp_release, rp_extend, rp_release_all and rp_leases take permits as they
-- take locks.  None of these functions is STRICT: a NULL argument is an
-- error (22004), never a NULL result that would read as "not acquired".

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
