-- Fencing, enforced by PostgreSQL.

CREATE FUNCTION @extschema@.rp_fence_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'rp_fence_guard'
LANGUAGE C;
COMMENT ON FUNCTION @extschema@.rp_fence_guard() IS
  'BEFORE INSERT OR UPDATE FOR EACH ROW trigger, args (column [, ''error''|''skip'']): refuses a write whose fence token is lower than the stored one';

CREATE TABLE @extschema@.rp_fenced_store (
  resource   pg_catalog.text PRIMARY KEY,
  value      pg_catalog.jsonb,
  fence      pg_catalog.int8 NOT NULL,
  updated_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE @extschema@.rp_fenced_store IS
  'A fenced key-value store: a write carrying a lower fence token than the stored one is refused';

-- The store is an ordinary fenced table: the same trigger, in 'skip' mode.
CREATE TRIGGER rp_fenced_store_guard
  BEFORE INSERT OR UPDATE ON @extschema@.rp_fenced_store
  FOR EACH ROW EXECUTE FUNCTION @extschema@.rp_fence_guard('fence', 'skip');

CREATE FUNCTION @extschema@.rp_fenced_write(resource pg_catalog.text, value pg_catalog.jsonb,
                                            fence pg_catalog.int8)
RETURNS pg_catalog.bool
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  accepted pg_catalog.bool;
BEGIN
  IF resource IS NULL THEN
    RAISE EXCEPTION 'resource must not be NULL' USING ERRCODE = '22004';
  END IF;
  IF fence IS NULL THEN
    RAISE EXCEPTION 'fence must not be NULL' USING ERRCODE = '22004';
  END IF;
  INSERT INTO @extschema@.rp_fenced_store AS s (resource, value, fence, updated_at)
  VALUES (resource, value, fence, pg_catalog.clock_timestamp())
  ON CONFLICT ON CONSTRAINT rp_fenced_store_pkey DO UPDATE
    SET value = EXCLUDED.value, fence = EXCLUDED.fence, updated_at = EXCLUDED.updated_at
  RETURNING true INTO accepted;
  RETURN coalesce(accepted, false);
END
$$;
COMMENT ON FUNCTION @extschema@.rp_fenced_write(pg_catalog.text, pg_catalog.jsonb, pg_catalog.int8) IS
  'Write value under resource if fence is not lower than the stored token; false when refused as stale';

CREATE FUNCTION @extschema@.rp_fenced_read(resource pg_catalog.text,
                                           OUT value pg_catalog.jsonb, OUT fence pg_catalog.int8,
                                           OUT updated_at pg_catalog.timestamptz)
RETURNS record
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT s.value, s.fence, s.updated_at
  FROM @extschema@.rp_fenced_store AS s
  WHERE s.resource OPERATOR(pg_catalog.=) rp_fenced_read.resource
$$;
COMMENT ON FUNCTION @extschema@.rp_fenced_read(pg_catalog.text) IS
  'The fenced value of resource, its fence token and when it was written';
