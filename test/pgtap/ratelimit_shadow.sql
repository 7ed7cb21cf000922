-- Shadow mode: a new limit rolled out without refusing anyone.  The call
-- admits every request and reports, in would_refuse and in an exact count
-- kept in Redis, what enforcing the limit would have refused.  The shadow
-- window records exactly what the enforced one would (refusals record
-- nothing), so the count is the enforced limit's own; the naive twin, a
-- "shadow" that records every admitted request, over-counts.  On a pinned
-- clock (redis_primitives.ratelimit_clock_ms), so every number is exact.
-- The count lives redis_primitives.ratelimit_shadow_ttl after its last
-- refusal, never forever, and a request that can never be admitted is
-- counted by the same single script call that answers it.
BEGIN;
SELECT plan(41);

CREATE FUNCTION pg_temp.at(ms bigint) RETURNS text LANGUAGE sql AS $$
  SELECT set_config('redis_primitives.ratelimit_clock_ms', (1700000000000 + ms)::text, true)
$$;
SELECT pg_temp.at(0);

-- rp_stats before the burst (this session is the only rate limiter caller).
CREATE TEMP TABLE stats0 AS SELECT * FROM rp_stats WHERE primitive LIKE 'ratelimit\_%';

-- A burst of 25 over a limit of 10, in shadow and enforced, per algorithm.
CREATE TEMP TABLE burst (algorithm text, mode text, i int, allowed bool, would_refuse bool);
INSERT INTO burst
SELECT a, m, i, r.allowed, r.would_refuse
FROM unnest('{sliding_log,sliding_window,gcra}'::text[]) a, unnest('{shadow,enforce}'::text[]) m,
     generate_series(1, 25) i,
     LATERAL rp_ratelimit_consume('burst-' || a || '-' || m, 10, 60000, 1 + 0 * i, a, m) r  -- (i: once per row)
ORDER BY a, m, i;

SELECT is((SELECT count(*) FILTER (WHERE allowed) FROM burst WHERE algorithm = a AND mode = 'shadow'), 25::bigint,
          a || ': shadow mode admits all 25 requests of the burst')
FROM unnest('{sliding_log,sliding_window,gcra}'::text[]) a;
SELECT is((SELECT count(*) FILTER (WHERE would_refuse) FROM burst WHERE algorithm = a AND mode = 'shadow'), 15::bigint,
          a || ': and reports exactly 15 as would_refuse')
FROM unnest('{sliding_log,sliding_window,gcra}'::text[]) a;
SELECT is(rp_ratelimit_shadow_refusals('burst-' || a || '-shadow'), 15::bigint,
          a || ': Redis counted exactly 15 refusals')
FROM unnest('{sliding_log,sliding_window,gcra}'::text[]) a;
-- rp_stats: every shadow call is ok (it admitted), and the would-be refusals
-- show in shadow_refused, exactly what Redis counted; the enforced burst's
-- refusals are in refused.  calls = ok + refused + errors.
SELECT is((SELECT row(s.calls - b.calls, s.ok - b.ok, s.refused - b.refused, s.errors - b.errors,
                      s.shadow_refused - b.shadow_refused)::text
           FROM rp_stats s JOIN stats0 b USING (primitive) WHERE primitive = 'ratelimit_' || a),
          row(50, 35, 15, 0, rp_ratelimit_shadow_refusals('burst-' || a || '-shadow'))::text,
          a || ': rp_stats counts 50 calls, 35 ok (25 shadow + 10), 15 refused (enforced), shadow_refused = Redis'' count (15)')
FROM unnest('{sliding_log,sliding_window,gcra}'::text[]) a;
SELECT is((SELECT count(*) FROM rp_stats WHERE calls <> ok + refused + errors), 0::bigint,
          'calls = ok + refused + errors on every row');

SELECT is((SELECT array_agg(would_refuse ORDER BY i) FROM burst WHERE algorithm = a AND mode = 'shadow'),
          (SELECT array_agg(NOT allowed ORDER BY i) FROM burst WHERE algorithm = a AND mode = 'enforce'),
          a || ': request by request, would_refuse is what enforcing answered')
FROM unnest('{sliding_log,sliding_window,gcra}'::text[]) a;
SELECT is((SELECT row(p.*) FROM rp_ratelimit_peek('burst-' || a || '-shadow', 10, 60000, 1, a) p)::text,
          (SELECT row(p.*) FROM rp_ratelimit_peek('burst-' || a || '-enforce', 10, 60000, 1, a) p)::text,
          a || ': the shadow window holds what the enforced one holds (refusals recorded nothing)')
FROM unnest('{sliding_log,sliding_window,gcra}'::text[]) a;
SELECT is(rp_ratelimit_shadow_refusals('burst-sliding_log-enforce'), 0::bigint, 'enforce mode counts nothing');

-- A steady stream at twice the limit (a request every 50 ms against 10 per
-- second) for 3 s.  Shadow counts exactly the enforced limit's refusals; the
-- naive shadow (a limit too high to refuse, compared with the real one
-- afterwards: every request recorded) counts many more.
CREATE TEMP TABLE stream (i int, enforced bool, shadow bool, naive_used bigint);
DO $$
BEGIN
  FOR i IN 0..59 LOOP
    PERFORM pg_temp.at(10000 + i * 50);
    INSERT INTO stream SELECT i,
      (SELECT allowed FROM rp_ratelimit_consume('stream-e', 10, 1000, 1, 'sliding_log', 'enforce')),
      (SELECT NOT would_refuse FROM rp_ratelimit_consume('stream-s', 10, 1000, 1, 'sliding_log', 'shadow')),
      (SELECT 100000 - remaining FROM rp_ratelimit_consume('stream-n', 100000, 1000, 1, 'sliding_log'));
  END LOOP;
END $$;
SELECT is((SELECT count(*) FROM stream WHERE NOT enforced), 30::bigint, 'enforced, half the stream is refused');
SELECT is(rp_ratelimit_shadow_refusals('stream-s'), (SELECT count(*) FROM stream WHERE NOT enforced),
          'shadow counts exactly the refusals enforcing made');
SELECT cmp_ok((SELECT count(*) FROM stream WHERE naive_used > 10), '>', (SELECT count(*) FROM stream WHERE NOT enforced),
              'the naive shadow that records every request over-counts');

-- The boolean form, peeks, a request that can never be admitted, reset.
SELECT is((SELECT bool_and(rp_ratelimit('bool', 2, 60000, 1, 'gcra', 'shadow')) FROM generate_series(1, 5)), true,
          'rp_ratelimit in shadow mode is always true');
SELECT is(rp_ratelimit_shadow_refusals('bool'), 3::bigint, 'and counted 3 of 5');
-- The count expires ratelimit_shadow_ttl (default 7 days) after its last
-- refusal: a key refused once in shadow mode must not stay in Redis forever.
SELECT ok(coalesce(rp_test.redis('PTTL', rp_test.key('bool', 'rl:shadow'))::bigint
                   BETWEEN s.setting::bigint - 60000 AND s.setting::bigint, false),
          format('the count has a TTL of ratelimit_shadow_ttl (%s ms): PTTL = %s ms',
                 s.setting, rp_test.redis('PTTL', rp_test.key('bool', 'rl:shadow'))))
FROM (SELECT max(setting) AS setting FROM pg_settings WHERE name = 'redis_primitives.ratelimit_shadow_ttl') s;
SELECT rp_ratelimit_peek('bool', 2, 60000, 1, 'gcra');
SELECT is(rp_ratelimit_shadow_refusals('bool'), 3::bigint, 'a peek counts nothing');
SELECT is((SELECT row(allowed, retry_after_ms, would_refuse)::text FROM rp_ratelimit_consume('bool', 2, 60000, 3, 'gcra', 'shadow')),
          '(t,-1,t)', 'a cost above max_requests: admitted in shadow, would_refuse, never retryable');
SELECT is(rp_ratelimit_shadow_refusals('bool'), 4::bigint, 'and counted');
-- Answered and counted in one script call (Redis' own count of EVALSHA and
-- EVAL; this file has the Redis to itself), not a peek and then a count.
CREATE FUNCTION pg_temp.script_calls() RETURNS bigint LANGUAGE sql AS $$
  SELECT coalesce(sum(m[1]::bigint), 0)
  FROM regexp_matches(rp_test.redis('INFO', 'commandstats'), '^cmdstat_eval(?:sha)?:calls=(\d+)', 'gn') m
$$;
CREATE TEMP TABLE calls0 AS SELECT pg_temp.script_calls() AS n;
SELECT rp_ratelimit('bool', 2, 60000, 3, 'gcra', 'shadow');
SELECT is(pg_temp.script_calls() - (SELECT n FROM calls0), 1::bigint,
          'a cost above max_requests in shadow mode takes one script call');
SELECT is(rp_ratelimit_shadow_refusals('bool'), 5::bigint, 'which counted it');
-- On a fresh key the peek at max_requests units admits (the whole allowance
-- is left): the request is counted because it can never be admitted, not
-- because the peek refused it.
CREATE TEMP TABLE fresh AS
  SELECT a, rp_ratelimit('fresh-' || a, 2, 60000, 3, a, 'shadow') AS allowed
  FROM unnest('{gcra,sliding_log,sliding_window}'::text[]) a;
SELECT is((SELECT string_agg(a || ' ' || allowed || ' ' || rp_ratelimit_shadow_refusals('fresh-' || a), ', ' ORDER BY a) FROM fresh),
          'gcra true 1, sliding_log true 1, sliding_window true 1',
          'a cost above max_requests on a fresh key: admitted in shadow and counted, per algorithm');
-- The TTL follows the setting: each refusal sets it afresh.
SELECT lives_ok($$SET LOCAL redis_primitives.ratelimit_shadow_ttl = '10s'$$,
                'SET redis_primitives.ratelimit_shadow_ttl = ''10s''');
SELECT rp_ratelimit('bool', 2, 60000, 1, 'gcra', 'shadow');
SELECT ok(coalesce(rp_test.redis('PTTL', rp_test.key('bool', 'rl:shadow'))::bigint BETWEEN 1 AND 10000, false),
          format('the next refusal set the count''s TTL to at most 10000 ms: PTTL = %s ms',
                 rp_test.redis('PTTL', rp_test.key('bool', 'rl:shadow'))));
SELECT is(rp_ratelimit_reset('bool'), true, 'rp_ratelimit_reset');
SELECT is(rp_ratelimit_shadow_refusals('bool'), 0::bigint, 'clears the count too');

-- Bad input, and the 1.0 form unchanged.
SELECT throws_ok($$SELECT rp_ratelimit('k', 2, 60000, 1, 'gcra', 'dry-run')$$, '22023', NULL, 'an unknown mode is 22023');
SELECT throws_ok($$SELECT rp_ratelimit_consume('k', 2, 60000, 1, 'gcra', NULL)$$, '22004', NULL, 'a NULL mode is 22004');
SELECT is((SELECT count(*) FROM rp_ratelimit_consume('k', 2, 60000) r, LATERAL jsonb_object_keys(to_jsonb(r))), 4::bigint,
          'the 1.0 form still returns the 1.0 record');
SELECT throws_ok($$SET redis_primitives.ratelimit_shadow_ttl = '999ms'$$, '22023', NULL,
                 'a ratelimit_shadow_ttl under 1000 ms is refused (22023)');

-- Every key this file left behind has a TTL, the shadow counts included.
SELECT is(rp_test.keys_without_ttl('*:rl:*'), 0::bigint, 'no rate-limit key in Redis lacks a TTL');

SELECT * FROM finish();
ROLLBACK;
