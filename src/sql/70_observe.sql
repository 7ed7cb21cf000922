-- Seeing what it does: rp_stats, rp_locks, rp_stats_info (shared memory;
-- need redis_primitives in shared_preload_libraries).  Readable by every
-- role (granted in 95_observe_grants.sql, after the blanket REVOKE):
-- rp_stats holds counts only, and rp_locks shows a role only the leases of
-- roles whose privileges it has, unless it has pg_read_all_stats, as
-- pg_stat_activity does.  rp_stats_reset() is for superusers, to be granted.

CREATE FUNCTION @extschema@.rp_stats(
    OUT primitive pg_catalog.text, OUT calls pg_catalog.int8, OUT ok pg_catalog.int8,
    OUT refused pg_catalog.int8, OUT errors pg_catalog.int8,
    OUT errors_08 pg_catalog.int8, OUT errors_53 pg_catalog.int8,
    OUT errors_57 pg_catalog.int8, OUT errors_rp pg_catalog.int8,
    OUT errors_other pg_catalog.int8, OUT timeouts pg_catalog.int8,
    OUT reconnects pg_catalog.int8, OUT noscript pg_catalog.int8,
    OUT total_ms pg_catalog.float8, OUT max_ms pg_catalog.float8)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rp_stats'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.rp_stats() IS
  'Calls of each primitive by every backend and the elector since the last rp_stats_reset(): outcomes, errors by SQLSTATE class, timeouts, reconnects, NOSCRIPT reloads, time';

CREATE VIEW @extschema@.rp_stats AS
  SELECT * FROM @extschema@.rp_stats();
COMMENT ON VIEW @extschema@.rp_stats IS
  'Calls of each primitive: calls = ok + refused + errors; refused = NULL (not acquired, no longer held) or false (refused, not held)';

CREATE FUNCTION @extschema@.rp_stats_reset()
RETURNS pg_catalog.void
AS 'MODULE_PATHNAME', 'rp_stats_reset'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.rp_stats_reset() IS
  'Set every counter of rp_stats to zero';

CREATE FUNCTION @extschema@.rp_stats_info(
    OUT stats_reset pg_catalog.timestamptz, OUT track pg_catalog.bool,
    OUT locks_capacity pg_catalog.int4, OUT locks_shown pg_catalog.int4,
    OUT locks_not_shown pg_catalog.int8, OUT locks_not_shown_total pg_catalog.int8,
    OUT shmem_bytes pg_catalog.int8)
RETURNS record
AS 'MODULE_PATHNAME', 'rp_stats_info'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.rp_stats_info() IS
  'When rp_stats was reset, whether this session counts, how full rp_locks is, and the shared memory both take';

CREATE VIEW @extschema@.rp_stats_info AS
  SELECT * FROM @extschema@.rp_stats_info();
COMMENT ON VIEW @extschema@.rp_stats_info IS
  'When rp_stats was reset, how full rp_locks is (locks_not_shown: leases held now that the table had no room for), shared memory used';

CREATE FUNCTION @extschema@.rp_locks(
    OUT pid pg_catalog.int4, OUT database pg_catalog.oid, OUT roleid pg_catalog.oid,
    OUT name pg_catalog.text, OUT fence pg_catalog.int8, OUT scope pg_catalog.text,
    OUT acquired_at pg_catalog.timestamptz, OUT expires_at pg_catalog.timestamptz,
    OUT expired pg_catalog.bool)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rp_locks'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.rp_locks() IS
  'Every lease a backend of this server believes it holds';

CREATE VIEW @extschema@.rp_locks AS
  SELECT * FROM @extschema@.rp_locks();
COMMENT ON VIEW @extschema@.rp_locks IS
  'Every lease a backend of this server believes it holds, joinable to pg_stat_activity by pid; expired: its local deadline (expires_at) has passed';
