-- The lock's own failures: release discipline, waiting, lock_timeout, and
-- Redis forgetting its scripts.
BEGIN;
SELECT plan(22);

CREATE TEMP TABLE lease (who text PRIMARY KEY, l rp_lease);

-- Release discipline.  A's 200 ms lease expires while it works; B takes the
-- lock; A's cleanup must not delete B's lock.
INSERT INTO lease SELECT 'A', rp_acquire('job-7', 200);
SELECT pg_sleep(0.25);
INSERT INTO lease SELECT 'B', rp_acquire('job-7', 10000);
SELECT ok((SELECT l FROM lease WHERE who = 'B') IS NOT NULL, 'B acquires after A''s lease expired');
SELECT is(rp_release((SELECT l FROM lease WHERE who = 'A')), false, 'A''s compare-and-delete returns false');
SELECT is((rp_lock_info('job-7')).held, true, 'B still holds the lock');
-- and must not extend it either (mutant 07: extend by existence, not token)
SELECT is(rp_extend((SELECT l FROM lease WHERE who = 'A'), 60000), NULL, 'A''s compare-and-extend returns NULL');
SELECT ok((rp_lock_info('job-7')).ttl_ms <= 10000, '... and B''s lease keeps its own TTL (not A''s 60 s)');
SELECT is(rp_test.redis('SET', rp_test.key('job-7', 'lock'), 'third', 'NX', 'PX', '1000'), '', 'a third worker is kept out');
SELECT rp_release_all();

-- The naive twin: the release a user writes first, a plain DEL of the key.
-- The same expiry: A's cleanup runs after B took the lock.
CREATE FUNCTION pg_temp.naive_release(name text) RETURNS text LANGUAGE sql
  AS $$ SELECT rp_test.redis('DEL', rp_test.key(name, 'lock')) $$;
TRUNCATE lease;
INSERT INTO lease SELECT 'A', rp_acquire('job-8', 200);
SELECT pg_sleep(0.25);
INSERT INTO lease SELECT 'B', rp_acquire('job-8', 10000);
SELECT is(pg_temp.naive_release('job-8'), '1',
          'naive: A''s plain-DEL release deletes a key although A''s lease had expired: B''s');
INSERT INTO lease SELECT 'C', rp_acquire('job-8', 10000);
SELECT ok((SELECT l FROM lease WHERE who = 'C') IS NOT NULL,
          'naive: so a third worker acquires while B still works');
SELECT rp_release_all();

-- wait_ms: acquires once the holder's lease expires ...
-- The holder is another client: a session never waits on its own lease.
-- Both ends are read on Redis' clock, not around statements a loaded machine
-- may run late: the holder's lease ends at its PEXPIRETIME, read in the
-- script that set it; the waiter's began at its own PEXPIRETIME less its TTL.
-- A waiter that asked only after the holder's lease ended (the machine
-- stalled between two statements) shows nothing about waiting: that try is
-- made again, up to five times.
CREATE FUNCTION pg_temp.wait_on_holder(OUT asked bigint, OUT holder_ends bigint,
                                       OUT got bool, OUT began bigint)
LANGUAGE plpgsql AS $$
DECLARE
  l rp_lease;
BEGIN
  FOR try IN 1 .. 5 LOOP
    holder_ends := rp_test.redis('EVAL',
      'redis.call(''SET'', KEYS[1], ''holder'', ''NX'', ''PX'', 300) return redis.call(''PEXPIRETIME'', KEYS[1])',
      '1', rp_test.key('slow', 'lock'))::bigint;
    asked := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    l := rp_acquire('slow', 60000, 30000);
    got := l IS NOT NULL;
    began := rp_test.redis('PEXPIRETIME', rp_test.key('slow', 'lock'))::bigint - 60000;
    EXIT WHEN asked < holder_ends;
    PERFORM rp_release(l) WHERE l IS NOT NULL;
  END LOOP;
END
$$;
CREATE TEMP TABLE w AS SELECT * FROM pg_temp.wait_on_holder();
SELECT ok(asked < holder_ends, 'a holder takes a 300 ms lease, and the waiter asks while it holds')
  FROM w;
SELECT ok(got, 'a waiter acquires within wait_ms') FROM w;
SELECT ok(began >= holder_ends,
          format('only after the holder''s lease expired (%s ms after, on Redis'' clock)', began - holder_ends))
  FROM w;
SELECT rp_release_all();
-- ... and returns NULL at the deadline.
SELECT is(rp_test.redis('SET', rp_test.key('busy', 'lock'), 'holder', 'NX', 'PX', '60000'), 'OK', 'a holder takes a 60 s lease');
CREATE TEMP TABLE t0 AS SELECT clock_timestamp() AS t;
SELECT is(rp_acquire('busy', 1000, 300), NULL, 'a waiter gives up with NULL at wait_ms');
-- NULL tells "gave up at wait_ms" from "waited for the holder's 60 s"; how
-- soon after wait_ms it gave up is test/timing/lock.sql's.
SELECT ok(clock_timestamp() - (SELECT t FROM t0) >= interval '290 ms',
          'at the deadline, not before');

-- lock_timeout ends a longer wait as it ends pg_advisory_lock's: 55P03.
SET LOCAL lock_timeout = '200ms';
SELECT throws_ok($$SELECT rp_acquire('busy', 1000, 30000)$$, '55P03', NULL,
                 'lock_timeout shorter than wait_ms raises 55P03');
RESET lock_timeout;
SELECT rp_release_all();

-- Redis forgets its scripts (SCRIPT FLUSH, or a restart): invisible.
SELECT ok(rp_acquire('flush', 10000) IS NOT NULL, 'acquire loads the script');
SELECT rp_test.redis('SCRIPT', 'FLUSH');
SELECT ok(rp_release('flush'), 'after SCRIPT FLUSH, release still works (NOSCRIPT retried)');
SELECT ok(rp_acquire('flush', 10000) IS NOT NULL, 'and acquire too');
SELECT rp_release_all();

-- A session whose lease expired and that acquires the name again holds only
-- the new lease: rp_release(name) releases it.
SELECT rp_acquire('again', 100);
SELECT pg_sleep(0.15);
SELECT rp_acquire('again', 10000);
SELECT is((SELECT count(*) FROM rp_leases() WHERE name = 'again'), 1::bigint,
          're-acquiring an expired name leaves one lease in rp_leases()');
SELECT ok(rp_release('again'), 'and rp_release(name) releases the live one');

-- floor is compared as a number, not as text: over a counter at 9, a floor
-- of 10 wins ('9' > '10' as strings), and a floor of 8 does not.
SELECT rp_test.redis('SET', rp_test.key('floor-num', 'fence'), '9');
SELECT is((rp_acquire('floor-num', 10000, 0, 10)).fence, 11::bigint,
          'floor 10 over a counter at 9: the token is 11 (compared as numbers)');
SELECT rp_release('floor-num');
SELECT is((rp_acquire('floor-num', 10000, 0, 8)).fence, 12::bigint,
          'floor 8 under a counter at 11: the counter goes on (12)');
SELECT rp_release('floor-num');

SELECT * FROM finish();
ROLLBACK;
