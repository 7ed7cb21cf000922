-- The rate limiter, deterministic behaviour.  The clock is pinned with the
-- test-only setting redis_primitives.ratelimit_clock_ms, so every field is
-- exact.  Limits are 3 per 100 s (100000 ms): keys expire on real time, and a
-- window this long outlives any pause of a loaded machine between two
-- statements.  t0 = 1000000000 ms is a multiple of the window, so
-- sliding_window's buckets start at t0, t0+100000, ...
\pset null '(null)'
-- Counters in Redis outlive a run (a fence never goes back) and the
-- suite may run against a Redis that an earlier run used (make
-- installcheck): this file's keys are under a key prefix of its own.
DO $$ BEGIN PERFORM set_config('redis_primitives.key_prefix',
  'rp-regress:' || gen_random_uuid() || ':', false); END $$;

-- at(ms): pin the limiter's clock to t0 + ms.
CREATE FUNCTION pg_temp.at(ms bigint) RETURNS text LANGUAGE sql AS $$
  SELECT set_config('redis_primitives.ratelimit_clock_ms', (1000000000 + ms)::text, false)
$$;
SELECT count(rp_ratelimit_reset(k)) AS cleared
FROM unnest('{log,win,gcra,gcral,cost,never,k,named}'::text[]) k;

-- ==== sliding_log: exact.  A unit admitted at t counts until t + 100000.
-- Three admitted at t0, t0+20000, t0+40000: remaining counts down.
SELECT pg_temp.at(0);
SELECT * FROM rp_ratelimit_consume('log', 3, 100000);
SELECT pg_temp.at(20000);
SELECT * FROM rp_ratelimit_consume('log', 3, 100000);
SELECT pg_temp.at(40000);
SELECT * FROM rp_ratelimit_consume('log', 3, 100000);
-- Full: refused.  Retry when the unit of t0 ages out (t0+100000, in 60000 ms);
-- full again when the newest, of t0+40000, does (in 100000 ms).
SELECT * FROM rp_ratelimit_consume('log', 3, 100000);
SELECT pg_temp.at(99999);
SELECT * FROM rp_ratelimit_consume('log', 3, 100000);
-- The refusals recorded nothing, and a peek consumes nothing: asked twice,
-- the same answer.
SELECT * FROM rp_ratelimit_peek('log', 3, 100000);
SELECT * FROM rp_ratelimit_peek('log', 3, 100000);
-- The window slides: at t0+100000 the unit of t0 is gone, one unit is free.
SELECT pg_temp.at(100000);
SELECT * FROM rp_ratelimit_peek('log', 3, 100000);
SELECT * FROM rp_ratelimit_consume('log', 3, 100000);
SELECT * FROM rp_ratelimit_consume('log', 3, 100000);
-- At t0+140000 the units of t0+20000 and t0+40000 are gone: two free; full
-- again 100000 ms after the newest unit (t0+100000).
SELECT pg_temp.at(140000);
SELECT * FROM rp_ratelimit_peek('log', 3, 100000);
SELECT pg_temp.at(200000);
SELECT * FROM rp_ratelimit_peek('log', 3, 100000);
-- The boolean form is the same decision.
SELECT rp_ratelimit('log', 3, 100000), rp_ratelimit('log', 3, 100000),
       rp_ratelimit('log', 3, 100000), rp_ratelimit('log', 3, 100000);

-- ==== sliding_window: e ms into the current bucket,
--      used = current + previous * (100000 - e) / 100000.
SELECT pg_temp.at(0);
SELECT * FROM rp_ratelimit_consume('win', 3, 100000, 1, 'sliding_window');
SELECT * FROM rp_ratelimit_consume('win', 3, 100000, 1, 'sliding_window');
SELECT * FROM rp_ratelimit_consume('win', 3, 100000, 1, 'sliding_window');
-- Full.  Retry once the next bucket is far enough in that
-- 3 * (100000 - e) / 100000 + 1 <= 3: e = 33334, at t0+133334.  Full again
-- when the bucket of t0 has slid out completely: t0+200000.
SELECT * FROM rp_ratelimit_consume('win', 3, 100000, 1, 'sliding_window');
SELECT * FROM rp_ratelimit_peek('win', 3, 100000, 1, 'sliding_window');
SELECT pg_temp.at(133333);
SELECT * FROM rp_ratelimit_peek('win', 3, 100000, 1, 'sliding_window');
SELECT pg_temp.at(133334);
SELECT * FROM rp_ratelimit_peek('win', 3, 100000, 1, 'sliding_window');
-- At t0+150000 the previous bucket weighs 1.5: one unit free.  After it, the
-- next is possible when 3 * (100000 - e) / 100000 + 2 <= 3: e = 66667.
SELECT pg_temp.at(150000);
SELECT * FROM rp_ratelimit_consume('win', 3, 100000, 1, 'sliding_window');
SELECT * FROM rp_ratelimit_consume('win', 3, 100000, 1, 'sliding_window');
SELECT pg_temp.at(166667);
SELECT * FROM rp_ratelimit_consume('win', 3, 100000, 1, 'sliding_window');
-- A new bucket: the bucket of t0+100000 (2 units) is now the previous one.
SELECT pg_temp.at(200000);
SELECT * FROM rp_ratelimit_peek('win', 3, 100000, 1, 'sliding_window');
-- Two buckets later nothing counts.
SELECT pg_temp.at(300000);
SELECT * FROM rp_ratelimit_peek('win', 3, 100000, 1, 'sliding_window');

-- ==== gcra: one cell every 100000/3 = 33333.33 ms, a burst of 3.
SELECT pg_temp.at(0);
SELECT * FROM rp_ratelimit_consume('gcra', 3, 100000, 1, 'gcra');
SELECT * FROM rp_ratelimit_consume('gcra', 3, 100000, 1, 'gcra');
SELECT * FROM rp_ratelimit_consume('gcra', 3, 100000, 1, 'gcra');
-- The burst is spent; the next cell is due at t0+33333.33: in 33334 ms,
-- rounded up to a whole ms.
SELECT * FROM rp_ratelimit_consume('gcra', 3, 100000, 1, 'gcra');
SELECT pg_temp.at(33333);
SELECT * FROM rp_ratelimit_peek('gcra', 3, 100000, 1, 'gcra');
SELECT pg_temp.at(33334);
SELECT * FROM rp_ratelimit_consume('gcra', 3, 100000, 1, 'gcra');
SELECT * FROM rp_ratelimit_consume('gcra', 3, 100000, 1, 'gcra');
-- Cells refill one per 33333.33 ms: at t0+100000 two are back, at
-- t0+133334 all three.
SELECT pg_temp.at(100000);
SELECT * FROM rp_ratelimit_peek('gcra', 3, 100000, 1, 'gcra');
SELECT pg_temp.at(133334);
SELECT * FROM rp_ratelimit_peek('gcra', 3, 100000, 1, 'gcra');
-- A state stored under another limit is read rounded up, never down: one
-- unit under L = 3 leaves the TAT at t0+33333.33, which under L = 2 reads as
-- t0+33334 (full again in 33334 ms, not 33333: never early).
SELECT pg_temp.at(0);
SELECT * FROM rp_ratelimit_consume('gcral', 3, 100000, 1, 'gcra');
SELECT * FROM rp_ratelimit_peek('gcral', 2, 100000, 1, 'gcra');

-- ==== cost: a request takes cost units, all or nothing.
SELECT pg_temp.at(0);
SELECT a, r.* FROM unnest('{sliding_log,sliding_window,gcra}'::text[]) WITH ORDINALITY AS u(a, i),
  LATERAL rp_ratelimit_consume('cost', 5, 100000, 3, a) r ORDER BY i;
-- 2 units left: a cost of 3 is refused and takes nothing; a cost of 2 fits.
SELECT a, r.* FROM unnest('{sliding_log,sliding_window,gcra}'::text[]) WITH ORDINALITY AS u(a, i),
  LATERAL rp_ratelimit_consume('cost', 5, 100000, 3, a) r ORDER BY i;
SELECT a, r.* FROM unnest('{sliding_log,sliding_window,gcra}'::text[]) WITH ORDINALITY AS u(a, i),
  LATERAL rp_ratelimit_consume('cost', 5, 100000, 2, a) r ORDER BY i;

-- ==== cost > max_requests can never be admitted: not an error, but
-- allowed = false with retry_after_ms = -1, and nothing is recorded.
SELECT a, r.* FROM unnest('{sliding_log,sliding_window,gcra}'::text[]) WITH ORDINALITY AS u(a, i),
  LATERAL rp_ratelimit_consume('never', 5, 100000, 6, a) r ORDER BY i;
SELECT a, r.* FROM unnest('{sliding_log,sliding_window,gcra}'::text[]) WITH ORDINALITY AS u(a, i),
  LATERAL rp_ratelimit_peek('never', 5, 100000, 1, a) r ORDER BY i;
SELECT rp_ratelimit('never', 5, 100000, 9223372036854775807);

-- ==== reset forgets every algorithm's state of the key at once: 'cost' is
-- full under all three, then empty under all three.
SELECT a, r.* FROM unnest('{sliding_log,sliding_window,gcra}'::text[]) WITH ORDINALITY AS u(a, i),
  LATERAL rp_ratelimit_peek('cost', 5, 100000, 1, a) r ORDER BY i;
SELECT rp_ratelimit_reset('cost');
SELECT rp_ratelimit_reset('cost');
SELECT a, r.* FROM unnest('{sliding_log,sliding_window,gcra}'::text[]) WITH ORDINALITY AS u(a, i),
  LATERAL rp_ratelimit_peek('cost', 5, 100000, 1, a) r ORDER BY i;

-- ==== Bad input: a clear error with the right SQLSTATE, before any Redis call.
\set VERBOSITY sqlstate
-- 22004: NULL where a value is required
SELECT rp_ratelimit(NULL, 3, 1000);
SELECT rp_ratelimit('k', NULL, 1000);
SELECT rp_ratelimit('k', 3, NULL);
SELECT rp_ratelimit('k', 3, 1000, NULL);
SELECT rp_ratelimit('k', 3, 1000, 1, NULL);
SELECT * FROM rp_ratelimit_consume(NULL, 3, 1000);
SELECT * FROM rp_ratelimit_peek(NULL, 3, 1000);
SELECT rp_ratelimit_reset(NULL);
-- 22023: out of range
SELECT rp_ratelimit('', 3, 1000);
SELECT rp_ratelimit('k', 0, 1000);
SELECT rp_ratelimit('k', -1, 1000);
SELECT rp_ratelimit('k', 3, 0);
SELECT rp_ratelimit('k', 3, -1000);
SELECT rp_ratelimit('k', 3, 1000000000001);
SELECT rp_ratelimit('k', 3, 1000, 0);
SELECT rp_ratelimit('k', 3, 1000, -1);
SELECT * FROM rp_ratelimit_peek('k', 3, 1000, 0);
SELECT * FROM rp_ratelimit_consume('k', 3, 1000, 1, 'gcra ');
SELECT rp_ratelimit_reset('');
-- beyond what Lua's doubles hold exactly (max_requests * window_ms > 2^51),
-- and sliding_log's size bound, which the O(1) algorithms do not have
SELECT rp_ratelimit('k', 2251799813685248, 2, 1, 'gcra');
SELECT rp_ratelimit('k', 100001, 1000);
SELECT allowed FROM rp_ratelimit_peek('k', 100001, 1000, 1, 'sliding_window');
-- unknown algorithm: the hint names the valid ones
SELECT rp_ratelimit('k', 3, 1000, 1, 'token_bucket');
SELECT rp_ratelimit('k', 3, 1000, 1, 'SLIDING_LOG');
\set VERBOSITY default
SELECT rp_ratelimit('k', 3, 1000, 1, 'fixed_window');
\set VERBOSITY sqlstate
-- the pinned clock takes 0 or a whole number of ms; on_error three words
SET redis_primitives.ratelimit_clock_ms = '-1';
SET redis_primitives.ratelimit_clock_ms = 'soon';
SET redis_primitives.ratelimit_on_error = 'maybe';
\set VERBOSITY default
-- nothing was recorded by any of the above
SELECT a, r.* FROM unnest('{sliding_log,sliding_window,gcra}'::text[]) WITH ORDINALITY AS u(a, i),
  LATERAL rp_ratelimit_peek('k', 3, 1000, 1, a) r ORDER BY i;

-- ==== Both settings are superuser-only: a plain user can neither pin the
-- clock nor make the limiter fail open.
CREATE ROLE regress_rl_user;
SET ROLE regress_rl_user;
\set VERBOSITY sqlstate
SET redis_primitives.ratelimit_clock_ms = '0';
SET redis_primitives.ratelimit_on_error = 'allow';
\set VERBOSITY default
RESET ROLE;
DROP ROLE regress_rl_user;

-- ==== The SQL surface's argument names are part of the contract.
SELECT pg_temp.at(0);
SELECT * FROM rp_ratelimit_consume(key => 'named', max_requests => 2, window_ms => 100000,
                                   algorithm => 'gcra', cost => 2);
SELECT rp_ratelimit(key => 'named', max_requests => 2, window_ms => 100000, algorithm => 'gcra');

RESET redis_primitives.ratelimit_clock_ms;
SELECT count(rp_ratelimit_reset(k)) AS cleared
FROM unnest('{log,win,gcra,gcral,cost,never,k,named}'::text[]) k;
