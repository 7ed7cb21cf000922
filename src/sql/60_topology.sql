-- Topology diagnostics.

CREATE FUNCTION @extschema@.rp_key_slot(key pg_catalog.text)
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME', 'rp_key_slot_sql'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.rp_key_slot(pg_catalog.text) IS
  'The Redis Cluster hash slot of a key, as CLUSTER KEYSLOT computes it (CRC16 of its hash tag)';
