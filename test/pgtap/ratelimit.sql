-- The rate limiter against the failures it exists to prevent, each shown
-- first with the naive limiter doing what "rate limiting with Redis" usually
-- means, then with ours, on the same traffic, against the same Redis.
--
--   1. a fixed window (INCR + EXPIRE) lets a caller spend two allowances
--      across a boundary: 10 admitted within 104 ms against 5 per 1000 ms;
--   2. INCR and EXPIRE are two round trips: a crash between them leaves a
--      counter that never expires;
--   3. what each of our algorithms does and does not promise about any one
--      window-long span (the documented limits of sliding_window and gcra);
--   4. a refused request records nothing; sorted-set members are unique even
--      when every request lands on the same millisecond; key names;
--   5. every key has a TTL no longer than reset_after_ms;
--   6. memory per key after 10,000 admitted requests (numbers in the docs).
--
-- Concurrency (the three-round-trip sliding window) is a scenario:
-- test/scenarios/ratelimit_concurrency.sh.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(37);

-- The boundary traffic the TypeScript redis-primitives library tests its
-- limiter with (docs/ratelimit.md): 5 requests at the end of one 1000 ms
-- window and 5 at the start of the next, 104 ms from first to last.
-- T0 = 1700000000000 is a multiple of 1000.
CREATE TEMP TABLE traffic (t bigint);
INSERT INTO traffic VALUES
  (1699999999900), (1699999999920), (1699999999940), (1699999999960), (1699999999980),
  (1700000000000), (1700000000001), (1700000000002), (1700000000003), (1700000000004);
CREATE TEMP TABLE admitted (who text, t bigint);

-- The naive limiter, the fixed window usually found under "rate limiting
-- with Redis": INCR the bucket's counter, then EXPIRE it, in two round trips.
CREATE FUNCTION pg_temp.naive_fixed_window(key text, t bigint, lim bigint, window_ms bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  k text := key || ':' || (t / window_ms);
  n bigint;
BEGIN
  n := rp_test.redis('INCR', k)::bigint;
  PERFORM rp_test.redis('PEXPIRE', k, window_ms::text);
  RETURN n <= lim;
END $$;

-- Ours, with the clock pinned to t.
CREATE FUNCTION pg_temp.ours(key text, t bigint, lim bigint, window_ms bigint, alg text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('redis_primitives.ratelimit_clock_ms', t::text, true);
  RETURN rp_ratelimit(key, lim, window_ms, 1, alg);
END $$;

-- Send the traffic in time order through one limiter; record what it admits.
CREATE FUNCTION pg_temp.send(who text, key text, lim bigint, window_ms bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  r record;
  n bigint := 0;
BEGIN
  FOR r IN SELECT t FROM traffic ORDER BY t LOOP
    IF (CASE who
          WHEN 'naive' THEN pg_temp.naive_fixed_window('naive:' || key, r.t, lim, window_ms)
          ELSE pg_temp.ours(key, r.t, lim, window_ms, who)
        END) THEN
      INSERT INTO admitted VALUES (who, r.t);
      n := n + 1;
    END IF;
  END LOOP;
  RETURN n;
END $$;

-- The most requests a limiter admitted within any window-long span.
CREATE FUNCTION pg_temp.max_in_span(who_ text, window_ms bigint)
RETURNS bigint LANGUAGE sql AS $$
  SELECT coalesce(max((SELECT count(*) FROM admitted b
                       WHERE b.who = a.who AND b.t >= a.t AND b.t < a.t + window_ms)), 0)
  FROM admitted a WHERE a.who = who_
$$;

-- ---- 1. Fixed-window boundary doubling --------------------------------------
SELECT is(pg_temp.send('naive', 'rl-boundary', 5, 1000), 10::bigint,
  'naive INCR + EXPIRE fixed window: admits all 10 requests against a limit of 5 per 1000 ms');
SELECT is((SELECT max(t) - min(t) FROM admitted WHERE who = 'naive'), 104::bigint,
  'naive fixed window: the 10 admitted requests lie within 104 ms');
SELECT is(pg_temp.max_in_span('naive', 1000), 10::bigint,
  'naive fixed window: 10 admitted within one 1000 ms span, twice the limit');

SELECT is(pg_temp.send('sliding_log', 'rl-boundary', 5, 1000), 5::bigint,
  'sliding_log: the same traffic admits 5');
SELECT cmp_ok(pg_temp.max_in_span('sliding_log', 1000), '<=', 5::bigint,
  'sliding_log: at most 5 in any 1000 ms span of it');
SELECT is(pg_temp.send('sliding_window', 'rl-boundary', 5, 1000), 5::bigint,
  'sliding_window: the same traffic admits 5');
SELECT cmp_ok(pg_temp.max_in_span('sliding_window', 1000), '<=', 5::bigint,
  'sliding_window: at most 5 in any 1000 ms span of it');
SELECT is(pg_temp.send('gcra', 'rl-boundary', 5, 1000), 5::bigint,
  'gcra: the same traffic admits 5');
SELECT cmp_ok(pg_temp.max_in_span('gcra', 1000), '<=', 5::bigint,
  'gcra: at most 5 in any 1000 ms span of it');

-- ---- 2. INCR then EXPIRE: a crash between the two round trips ---------------
-- (The naive limiter killed between INCR and EXPIRE, leaving a counter that
-- never expires, is test/scenarios/ratelimit_concurrency.sh: it takes a real
-- backend to kill.)
-- Ours writes and sets the TTL inside one script: there is no "between".
SET LOCAL redis_primitives.ratelimit_clock_ms = '0';
CREATE TEMP TABLE fresh AS
  SELECT a, r.* FROM unnest('{sliding_log,sliding_window,gcra}'::text[]) a,
    LATERAL rp_ratelimit_consume('rl-ttl', 5, 60000, 1, a) r;
SELECT is((SELECT count(*) FROM fresh WHERE allowed), 3::bigint,
  'ours: one request admitted under each algorithm');
SELECT ok(pttl > 0 AND pttl <= reset_after_ms,
  format('ours, %s: the key has a TTL (%s ms), no longer than reset_after_ms (%s ms)', a, pttl, reset_after_ms))
FROM (SELECT a, reset_after_ms,
             rp_test.redis('PTTL', rp_test.key('rl-ttl', 'rl:' || a))::bigint AS pttl
      FROM fresh) s
ORDER BY a;
-- A refused request neither writes nor extends the TTL; cost > max creates nothing.
SELECT is((SELECT count(*) FROM unnest('{sliding_log,sliding_window,gcra}'::text[]) a
           WHERE rp_ratelimit('rl-never', 5, 60000, 6, a)), 0::bigint,
  'ours: cost > max_requests is refused under every algorithm');
SELECT is(rp_test.redis('EXISTS', rp_test.key('rl-never', 'rl:sliding_log'),
                        rp_test.key('rl-never', 'rl:sliding_window'),
                        rp_test.key('rl-never', 'rl:gcra')), '0',
  'ours: ... and no key was created for it');

-- ---- 3. What any one window-long span may hold ------------------------------
-- Adversarial traffic: 5 requests on the last millisecond of a bucket, then
-- one attempt every 10 ms for the next 990 ms.
TRUNCATE traffic, admitted;
INSERT INTO traffic SELECT 1699999999999 FROM generate_series(1, 5);
INSERT INTO traffic SELECT 1700000000000 + 10 * g FROM generate_series(0, 99) g;
SELECT is(pg_temp.send('sliding_log', 'rl-adversary', 5, 1000), 5::bigint,
  'sliding_log admits 5 of this traffic');
SELECT is(pg_temp.max_in_span('sliding_log', 1000), 5::bigint,
  'sliding_log is exact: never more than 5 in any 1000 ms span, whatever the traffic');
SELECT is(pg_temp.send('sliding_window', 'rl-adversary', 5, 1000), 9::bigint,
  'sliding_window admits 9 of this traffic');
SELECT is(pg_temp.max_in_span('sliding_window', 1000), 9::bigint,
  'sliding_window is approximate (documented): 2 * 5 - 1 = 9 in one 1000 ms span when the previous bucket''s requests all came at its end');
SELECT is(pg_temp.send('gcra', 'rl-adversary', 5, 1000), 9::bigint,
  'gcra admits 9 of this traffic');
SELECT is(pg_temp.max_in_span('gcra', 1000), 9::bigint,
  'gcra limits the rate, not a window (documented): a burst of 5 plus one per 200 ms gives 9 in one 1000 ms span');
SELECT is((SELECT array_agg(t - 1700000000000 ORDER BY t) FROM admitted WHERE who = 'gcra' AND t >= 1700000000000),
  ARRAY[200, 400, 600, 800]::bigint[],
  'gcra: after the burst, cells come back exactly every 1000 / 5 = 200 ms');

-- ---- 4. What is recorded, and where -----------------------------------------
SET LOCAL redis_primitives.ratelimit_clock_ms = '1700000000000';
SELECT is((SELECT count(*) FROM generate_series(1, 8) WHERE rp_ratelimit('rl-same-ms', 5, 60000)), 5::bigint,
  'sliding_log: 5 of 8 admitted on one pinned millisecond');
SELECT is(rp_test.redis('ZCARD', rp_test.key('rl-same-ms', 'rl:sliding_log')), '5',
  'sliding_log: 5 distinct members on the same score: ids are unique, not collapsed');
SELECT is((SELECT count(*) FROM generate_series(1, 5),
                LATERAL rp_ratelimit_peek('rl-same-ms', 5, 60000) p WHERE NOT p.allowed), 5::bigint,
  'peek: refused five times');
SELECT is(rp_test.redis('ZCARD', rp_test.key('rl-same-ms', 'rl:sliding_log')), '5',
  'neither the 3 refused requests nor the peeks recorded anything');
SELECT is(rp_test.redis('EXISTS', rp_test.key('rl-same-ms', 'rl:gcra')), '0',
  'no key for an algorithm that was never used');
SELECT ok(rp_ratelimit('rl-same-ms', 5, 60000, 1, 'gcra')
          AND rp_test.redis('GET', rp_test.key('rl-same-ms', 'rl:gcra')) = '1700000012000 0 5',
  'gcra: the key holds the theoretical arrival time, 60000 / 5 ms ahead');
SELECT is(rp_test.redis('EXISTS', rp_test.key('rl-same-ms', 'rl:sliding_window')), '0',
  'sliding_window: still untouched');
SELECT ok(rp_ratelimit_reset('rl-same-ms')
          AND rp_test.redis('EXISTS', rp_test.key('rl-same-ms', 'rl:sliding_log'),
                            rp_test.key('rl-same-ms', 'rl:gcra')) = '0',
  'reset deletes the keys of every algorithm');

-- ---- 5. Every key this suite left behind has a TTL --------------------------
SELECT is(rp_test.keys_without_ttl('*:rl:*'), 0::bigint, 'no rate-limit key in Redis lacks a TTL');

-- ---- 6. Memory per key after 10,000 admitted requests -----------------------
SET LOCAL redis_primitives.ratelimit_clock_ms = '0';
CREATE TEMP TABLE mem AS
  SELECT a, count(*) FILTER (WHERE rp_ratelimit('rl-memory', 10000, 3600000, 1, a)) AS admitted
  FROM unnest('{sliding_log,sliding_window,gcra}'::text[]) a, generate_series(1, 10000)
  GROUP BY a;
ALTER TABLE mem ADD COLUMN bytes bigint;
UPDATE mem SET bytes = rp_test.redis('MEMORY', 'USAGE', rp_test.key('rl-memory', 'rl:' || a), 'SAMPLES', '0')::bigint;
SELECT diag(format('MEMORY USAGE after %s admitted requests: %s = %s bytes', admitted, a, bytes))
FROM mem ORDER BY a;
SELECT is((SELECT min(admitted) FROM mem), 10000::bigint, 'memory: 10,000 admitted under each algorithm');
SELECT cmp_ok((SELECT bytes FROM mem WHERE a = 'sliding_window'), '<', 256::bigint,
  'sliding_window: the key stays under 256 bytes (O(1))');
SELECT cmp_ok((SELECT bytes FROM mem WHERE a = 'gcra'), '<', 256::bigint,
  'gcra: the key stays under 256 bytes (O(1))');
SELECT cmp_ok((SELECT bytes FROM mem WHERE a = 'sliding_log'), '>', 10000 * 32::bigint,
  'sliding_log: one member per admitted request (O(limit))');

-- The sliding log trims what aged out when it admits: after a window has
-- passed, the set holds the new request only, not every request ever made.
-- A 60 s window: the key's TTL runs on real time, and a 1 s one could run
-- out between these statements on a loaded machine (ZCARD 0).
SET LOCAL redis_primitives.ratelimit_clock_ms = '1800000000000';
SELECT count(*) FROM generate_series(1, 5) WHERE rp_ratelimit('rl-trim', 5, 60000, 1, 'sliding_log');
SET LOCAL redis_primitives.ratelimit_clock_ms = '1800000120000';
SELECT ok(rp_ratelimit('rl-trim', 5, 60000, 1, 'sliding_log'), 'a window later, a request is admitted');
SELECT is(rp_test.redis('ZCARD', rp_test.key('rl-trim', 'rl:sliding_log')), '1',
  'sliding_log: the five requests that aged out were trimmed (ZCARD 1)');

SELECT * FROM finish();
ROLLBACK;
