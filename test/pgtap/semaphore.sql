-- The semaphore's own failures, in one session: bad input, a permit that is
-- a lease like a lock's (token, fence from the name's sequence, release and
-- extend by compare-and-act), expired permits reclaimed inside the script,
-- and the waiter queue keeping a freed permit for the waiter ahead (the
-- naive twin, a semaphore without a queue, hands it to a newcomer).
-- Other holders and waiters are written into Redis directly (rp_test.redis):
-- the live, many-session races are in test/scenarios/semaphore.sh.
BEGIN;
SELECT plan(47);

CREATE TEMP TABLE p (who text PRIMARY KEY, l rp_lease);
CREATE FUNCTION pg_temp.zadd(name text, suffix text, score text, member text) RETURNS text
LANGUAGE sql AS $$ SELECT rp_test.redis('ZADD', rp_test.key(name, suffix), score, member) $$;

-- Bad input: an error with the right SQLSTATE, never a NULL.
SELECT throws_ok($$SELECT rp_semaphore_acquire(NULL, 5, 1000)$$, '22004', NULL, 'NULL name is 22004');
SELECT throws_ok($$SELECT rp_semaphore_acquire('', 5, 1000)$$, '22023', NULL, 'empty name is 22023');
SELECT throws_ok($$SELECT rp_semaphore_acquire('s', NULL, 1000)$$, '22004', NULL, 'NULL permits is 22004');
SELECT throws_ok($$SELECT rp_semaphore_acquire('s', 0, 1000)$$, '22023', NULL, 'permits 0 is 22023');
SELECT throws_ok($$SELECT rp_semaphore_acquire('s', 5, 0)$$, '22023', NULL, 'ttl_ms 0 is 22023');
SELECT throws_ok($$SELECT rp_semaphore_acquire('s', 5, 1000, -1)$$, '22023', NULL, 'negative wait_ms is 22023');
SELECT throws_ok($$SELECT rp_semaphore_acquire_xact('s', 5, NULL)$$, '22004', NULL, 'NULL ttl_ms is 22004 (xact form)');
SELECT throws_ok($$SELECT rp_semaphore_info('')$$, '22023', NULL, 'rp_semaphore_info of an empty name is 22023');

-- A permit is a lease: token, fence from the name's sequence, expiry.
SELECT (rp_acquire('sem-a', 10000)).fence;   -- the lock of the same name: fence 1
SELECT rp_release('sem-a');
INSERT INTO p SELECT 'me', rp_semaphore_acquire('sem-a', 3, 10000);
SELECT is((SELECT (l).fence FROM p WHERE who = 'me'), 2::bigint,
          'a permit''s fence continues the lock''s sequence of the same name');
SELECT ok((SELECT (l).token ~ '^s[0-9a-f]{31}$' FROM p WHERE who = 'me'), 'a permit has a token of its own kind');
SELECT is((SELECT in_use FROM rp_semaphore_info('sem-a')), 1, 'rp_semaphore_info counts it');
SELECT ok((SELECT oldest_ttl_ms BETWEEN 1 AND 10000 FROM rp_semaphore_info('sem-a')), 'and reports its time left');
SELECT is((SELECT last_fence FROM rp_semaphore_info('sem-a')), 2::bigint, 'and the last fence issued');
SELECT is((SELECT count(*) FROM rp_leases() WHERE name = 'sem-a'), 1::bigint, 'rp_leases lists the permit');
SELECT is(rp_semaphore_acquire('sem-a', 3, 10000), (SELECT l FROM p WHERE who = 'me'),
          'asked again, the session gets its live permit back, no second one');
SELECT is((SELECT in_use FROM rp_semaphore_info('sem-a')), 1, 'still one permit in use');
SELECT is((rp_acquire('sem-a', 1000)).fence, 3::bigint, 'the lock of the name takes the next fence');
SELECT rp_release('sem-a');  -- releases one lease of the name (the lock or the permit)
SELECT rp_release_all();

-- Compare-and-act release and extend work on a permit.
TRUNCATE p;
INSERT INTO p SELECT 'me', rp_semaphore_acquire('sem-b', 2, 10000);
SELECT ok((rp_extend((SELECT l FROM p), 60000)).expires_at > now() + interval '50 seconds',
          'rp_extend extends a permit');
SELECT ok((SELECT oldest_ttl_ms > 50000 FROM rp_semaphore_info('sem-b')), 'in Redis too');
SELECT is(rp_release((SELECT l FROM p)), true, 'rp_release(lease) releases a permit');
SELECT is(rp_release((SELECT l FROM p)), false, 'a second release finds nothing');
SELECT is(rp_extend((SELECT l FROM p), 1000), NULL, 'a released permit cannot be extended');
SELECT is((SELECT in_use FROM rp_semaphore_info('sem-b')), 0, 'nothing in use');

-- At most `permits`: two other holders fill a semaphore of 2.
SELECT pg_temp.zadd('sem-c', 'sem', '99999999999999', 'sother1');
SELECT pg_temp.zadd('sem-c', 'sem', '99999999999999', 'sother2');
SELECT is(rp_semaphore_acquire('sem-c', 2, 10000), NULL, 'a full semaphore refuses (NULL)');
SELECT is(rp_semaphore_acquire('sem-c', 2, 10000, 300), NULL, 'and still refuses after wait_ms');
SELECT is(rp_test.redis('ZCARD', rp_test.key('sem-c', 'semq')), '0', 'a waiter that gave up leaves the queue');
-- A holder that died leaves an expired permit: the acquire reclaims it.
SELECT pg_temp.zadd('sem-c', 'sem', '1000', 'sother2');
SELECT isnt(rp_semaphore_acquire('sem-c', 2, 10000), NULL, 'an expired permit is reclaimed inside the script');
SELECT is(rp_test.redis('ZSCORE', rp_test.key('sem-c', 'sem'), 'sother2'), '', 'the dead holder''s permit is gone');
SELECT rp_release_all();

-- Fairness: a live waiter queued ahead keeps the one free permit.
SELECT pg_temp.zadd('sem-d', 'sem', '99999999999999', 'sother1');
SELECT pg_temp.zadd('sem-d', 'semq', '1', 'swaiter');
SELECT pg_temp.zadd('sem-d', 'semw', '99999999999999', 'swaiter');
SELECT is(rp_semaphore_acquire('sem-d', 2, 10000), NULL,
          'a newcomer does not take the permit an earlier waiter is owed');
SELECT is((SELECT waiters FROM rp_semaphore_info('sem-d')), 1, 'rp_semaphore_info counts the waiter');
-- The naive twin: the same semaphore with no queue hands the permit over.
SELECT rp_test.redis('DEL', rp_test.key('sem-d', 'semq'));
SELECT isnt(rp_semaphore_acquire('sem-d', 2, 10000), NULL,
            'without the queue (the naive twin) the newcomer takes it: the waiter starves');
SELECT rp_release_all();
-- A waiter that vanished stops holding the queue once its heartbeat ends.
SELECT pg_temp.zadd('sem-e', 'sem', '99999999999999', 'sother1');
SELECT pg_temp.zadd('sem-e', 'semq', '1', 'swaiter');
SELECT pg_temp.zadd('sem-e', 'semw', '1000', 'swaiter');
SELECT isnt(rp_semaphore_acquire('sem-e', 2, 10000), NULL, 'a silent waiter''s place lapses');
SELECT is(rp_test.redis('ZCARD', rp_test.key('sem-e', 'semq')), '0', 'and it is removed from the queue');
SELECT rp_release_all();

-- The pool-safe forms act on a permit by its token, with the permit's own
-- scripts (a permit lives in the ":sem" sorted set, not the lock's key).
INSERT INTO p SELECT 'pool', rp_semaphore_acquire('sem-f', 2, 10000);
SELECT is((rp_extend('sem-f', (SELECT (l).token FROM p WHERE who = 'pool'), 60000)).fence,
          (SELECT (l).fence FROM p WHERE who = 'pool'),
          'rp_extend(name, token, ttl_ms) extends a permit, and the holding session gets its fence');
SELECT ok((SELECT oldest_ttl_ms > 50000 FROM rp_semaphore_info('sem-f')), 'the permit lives 60 s in Redis now');
SELECT ok((SELECT expires_at > now() + interval '50 seconds' FROM rp_leases() WHERE name = 'sem-f'),
          'and the session''s registry moved its deadline too');
-- Another session (a pool) knows only the token: simulated by a token the
-- registry does not hold (a permit's shape: 's' and 31 hex digits), written
-- into Redis directly.
SELECT pg_temp.zadd('sem-f', 'sem', '99999999999999', 's0123456789abcdef0123456789abcde');
SELECT is(rp_extend('sem-f', 's0123456789abcdef0123456789abcde', 30000) IS NULL, false,
          'rp_extend by token extends a permit this session does not hold');
SELECT is((rp_extend('sem-f', 's0123456789abcdef0123456789abcde', 30000)).fence, NULL,
          'its fence is NULL: Redis keeps no fence per permit');
SELECT is(rp_release('sem-f', 's0123456789abcdef0123456789abcde'), true, 'rp_release(name, token) releases a permit');
SELECT is(rp_release('sem-f', 's0123456789abcdef0123456789abcde'), false, 'a second release finds nothing');
SELECT is(rp_extend('sem-f', 's0123456789abcdef0123456789abcde', 1000), NULL, 'a released permit cannot be extended by token');
SELECT is(rp_release('sem-f', (SELECT (l).token FROM p WHERE who = 'pool')), true, 'the session''s own permit, released by token');
SELECT is((SELECT count(*) FROM rp_leases() WHERE name = 'sem-f'), 0::bigint, 'is forgotten by the registry');
SELECT is((SELECT in_use FROM rp_semaphore_info('sem-f')), 0, 'nothing in use');

-- The lock-bound fence guard accepts a live permit of a semaphore on the
-- rendered name, stamps its fence, and refuses an expired one (RP004).
SET LOCAL redis_primitives.lease_margin = 50;
CREATE TABLE sem_job (id int PRIMARY KEY, state text, fence_token bigint);
CREATE TRIGGER sem_job_fence BEFORE INSERT OR UPDATE OR DELETE ON sem_job
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=job-{id}');
INSERT INTO p SELECT 'job', rp_semaphore_acquire('job-1', 3, 60000);
SELECT lives_ok($$INSERT INTO sem_job VALUES (1, 'running')$$, 'lock-bound guard: a live permit of job-1 may write');
SELECT is((SELECT fence_token FROM sem_job WHERE id = 1), (SELECT (l).fence FROM p WHERE who = 'job'),
          'the row is stamped with the permit''s fence');
SELECT rp_release_all();
INSERT INTO p SELECT 'short', rp_semaphore_acquire('job-1', 3, 300);
SELECT pg_sleep(0.6);
SELECT throws_ok($$UPDATE sem_job SET state = 'late' WHERE id = 1$$, 'RP004', NULL,
                 'an expired permit is refused (RP004)');
SELECT rp_release_all();

SELECT * FROM finish();
ROLLBACK;
