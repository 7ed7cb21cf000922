-- Privileges.  These functions reach an external service, hold state other
-- roles depend on (leases, rate-limit counters, leadership) and can consume
-- Redis memory, so nothing is granted to PUBLIC: the DBA grants EXECUTE to
-- the roles that need it (docs/security.md has a ready GRANT block).  The
-- exceptions: the trigger function (a trigger runs with the privileges of
-- whoever writes the row, and creating one already requires owning the
-- table), and the monitoring functions and views, granted again to PUBLIC
-- in 95_observe_grants.sql (counts, and in rp_locks only the leases of
-- roles whose privileges the reader has, as pg_stat_activity shows).  docs/security.md lists both, and
-- test/scenarios/security.sh checks that the list and these grants agree.
-- The fenced store is readable and writable only through grants.
DO $$
DECLARE
  f pg_catalog.regprocedure;
BEGIN
  FOR f IN
    SELECT d.objid::pg_catalog.regprocedure
    FROM pg_catalog.pg_depend d
    JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
    WHERE e.extname OPERATOR(pg_catalog.=) 'redis_primitives'
      AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
      AND d.deptype OPERATOR(pg_catalog.=) 'e'
      AND d.objid::pg_catalog.regprocedure OPERATOR(pg_catalog.<>)
          '@extschema@.rp_fence_guard()'::pg_catalog.regprocedure
  LOOP
    EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
  END LOOP;
END
$$;

REVOKE ALL ON TABLE @extschema@.rp_fenced_store FROM PUBLIC;
