-- Bad input: a clear error with the right SQLSTATE, never a NULL that reads as
-- "not acquired".
\set VERBOSITY sqlstate
\pset null '(null)'
-- Counters in Redis outlive a run (a fence never goes back) and the
-- suite may run against a Redis that an earlier run used (make
-- installcheck): this file's keys are under a key prefix of its own.
DO $$ BEGIN PERFORM set_config('redis_primitives.key_prefix',
  'rp-regress:' || gen_random_uuid() || ':', false); END $$;

-- 22004: NULL where a value is required
SELECT rp_acquire(NULL, 1000);
SELECT rp_acquire('x', NULL);
SELECT rp_acquire('x', 1000, NULL);
SELECT rp_acquire('x', 1000, 0, NULL);
SELECT rp_acquire_xact(NULL, 1000);
SELECT rp_release(NULL::text);
SELECT rp_release(NULL::rp_lease);
SELECT rp_release(ROW(NULL, 't', 1, now())::rp_lease);
SELECT rp_release(ROW('x', NULL, 1, now())::rp_lease);
SELECT rp_extend(NULL::rp_lease, 1000);
SELECT rp_lock_info(NULL);
SELECT rp_fenced_write(NULL, '{}', 1);
SELECT rp_fenced_write('r', '{}', NULL);
SELECT rp_fenced_read(NULL);

-- 22023: out of range
SELECT rp_acquire('x', 0);
SELECT rp_acquire('x', -1);
SELECT rp_acquire('x', 9223372036854775807);
SELECT rp_acquire('x', 1000, -1);
SELECT rp_acquire('x', 1000, 0, -1);
SELECT rp_acquire('x', 1000, 0, 9223372036854775807);
SELECT rp_acquire('', 1000);
SELECT rp_extend(ROW('x', 't', 1, now())::rp_lease, 0);
-- a lease record no rp_acquire can return: an error, not false/NULL
SELECT rp_release(ROW('', repeat('0', 32), 1, now())::rp_lease);
SELECT rp_extend(ROW('', repeat('0', 32), 1, now())::rp_lease, 1000);
SELECT rp_extend(ROW('x', repeat('0', 32), NULL, now())::rp_lease, 1000);
-- the fenced store: no token is negative, and an empty resource is a
-- caller's unset variable, not a name every such caller should share
SELECT rp_fenced_write('', '{}', 1);
SELECT rp_fenced_write('r', '{}', -1);

-- nothing was taken or written by any of the above
SELECT count(*) AS leases FROM rp_leases();
SELECT held FROM rp_lock_info('x');
SELECT count(*) AS stored FROM rp_fenced_store WHERE resource IN ('', 'r');
