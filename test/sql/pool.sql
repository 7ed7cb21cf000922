-- Connection pools: the loud failures and DISCARD ALL.
\pset null '(null)'
-- Counters in Redis outlive a run (a fence never goes back) and the
-- suite may run against a Redis that an earlier run used (make
-- installcheck): this file's keys are under a key prefix of its own.
DO $$ BEGIN PERFORM set_config('redis_primitives.key_prefix',
  'rp-regress:' || gen_random_uuid() || ':', false); END $$;

-- rp_release(name) on a session that holds nothing on the name warns: behind
-- a pool the release ran on another backend, and false alone is too quiet.
SELECT rp_release('pool-nothing');

-- An administrator turns session leases off for a role that connects through
-- a transaction-pooling pool: rp_acquire fails, with a hint; rp_acquire_xact
-- still works, and no lease was taken by the refused call.
SET redis_primitives.session_leases = off;
SELECT rp_acquire('pool-refused', 10000);
SELECT held FROM rp_lock_info('pool-refused');
BEGIN;
SELECT name, fence > 0 AS has_fence FROM rp_acquire_xact('pool-xact', 10000);
COMMIT;
SELECT held FROM rp_lock_info('pool-xact');
-- So are rp_acquire_all and rp_semaphore_acquire, whose leases and permit the
-- session would hold too: each hint names the _xact form that works.
SELECT rp_acquire_all(ARRAY['pool-refused', 'pool-refused-2'], 10000);
SELECT rp_semaphore_acquire('pool-refused-sem', 2, 10000);
SELECT in_use, last_fence FROM rp_semaphore_info('pool-refused-sem');
RESET redis_primitives.session_leases;

-- DISCARD ALL (PgBouncer's server_reset_query) ends the session's state, so
-- it releases the session's leases, as it releases advisory locks.
SELECT name FROM rp_acquire('pool-discard', 60000);
SELECT pg_advisory_lock(42);
DISCARD ALL;
\pset null '(null)'
SELECT held FROM rp_lock_info('pool-discard');
SELECT count(*) AS leases FROM rp_leases();
SELECT count(*) AS advisory FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
-- Inside a transaction block DISCARD ALL is refused and releases nothing.
SELECT name FROM rp_acquire('pool-discard', 60000);
BEGIN;
DISCARD ALL;
ROLLBACK;
SELECT held FROM rp_lock_info('pool-discard');
-- DISCARD of anything else leaves leases alone.
DISCARD PLANS;
SELECT held FROM rp_lock_info('pool-discard');
SELECT rp_release_all();
