-- test/timing/lock.sql -- a waiter gives up at wait_ms, not seconds after.
-- test/pgtap/lock.sql asserts that it gives up with NULL (not waiting for
-- the holder's 60 s) and not before its deadline; this file bounds how
-- late, timed inside the server around the call alone.  10 s leaves a
-- busy machine room to run late.
BEGIN;
SELECT plan(1);

SELECT rp_test.redis('SET', rp_test.key('busy', 'lock'), 'holder', 'NX', 'PX', '60000');
CREATE FUNCTION pg_temp.timed_acquire(OUT got rp_lease, OUT ms float8) LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
  got := rp_acquire('busy', 1000, 300);
  ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
END
$$;
CREATE TEMP TABLE w AS SELECT * FROM pg_temp.timed_acquire();
SELECT ok(got IS NULL AND ms < 10000,
          format('a waiter (wait_ms 300) gives up with NULL within 10 s (%s ms)', round(ms::numeric)))
  FROM w;
SELECT rp_release_all();

SELECT * FROM finish();
ROLLBACK;
