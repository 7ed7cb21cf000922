-- Many locks in one round trip (docs/lock.md): all or nothing,
-- one lease and fence per name, an rp_lease[] in the order of the names,
-- NULL when not acquired within wait_ms.  Not STRICT: a NULL argument is an
-- error (22004), never a NULL result that would read as "not acquired".

CREATE FUNCTION @extschema@.rp_acquire_all(names pg_catalog.text[], ttl_ms pg_catalog.int8,
                                           wait_ms pg_catalog.int8 DEFAULT 0,
                                           floor pg_catalog.int8 DEFAULT 0)
RETURNS @extschema@.rp_lease[]
AS 'MODULE_PATHNAME', 'rp_acquire_all'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_acquire_all(pg_catalog.text[], pg_catalog.int8, pg_catalog.int8, pg_catalog.int8) IS
  'Take a lease on every name or on none, in one Redis round trip; one lease and fence per name, in the order given; NULL if not acquired within wait_ms (nothing is held while waiting)';

CREATE FUNCTION @extschema@.rp_acquire_all_xact(names pg_catalog.text[], ttl_ms pg_catalog.int8,
                                                wait_ms pg_catalog.int8 DEFAULT 0,
                                                floor pg_catalog.int8 DEFAULT 0)
RETURNS @extschema@.rp_lease[]
AS 'MODULE_PATHNAME', 'rp_acquire_all_xact'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_acquire_all_xact(pg_catalog.text[], pg_catalog.int8, pg_catalog.int8, pg_catalog.int8) IS
  'As rp_acquire_all, released when the transaction ends';
