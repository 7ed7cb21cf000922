-- Monitoring views are readable by every role (after 90_privileges.sql's
-- blanket REVOKE): see 70_observe.sql for what each role sees.
GRANT EXECUTE ON FUNCTION @extschema@.rp_stats(), @extschema@.rp_locks(),
  @extschema@.rp_stats_info() TO PUBLIC;
GRANT SELECT ON @extschema@.rp_stats, @extschema@.rp_locks,
  @extschema@.rp_stats_info TO PUBLIC;
