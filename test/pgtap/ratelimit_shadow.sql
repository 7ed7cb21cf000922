-- Shadow mode: a new limit rolled out without refusing anyone.  The call
-- admits every request and reports, in would_refuse and in an exact count
-- kept in Redis, what enforcing the limit would have refused.  The shadow
-- window records exactly what the enforced one would (refusals record
-- nothing), so the count is the enforced limit's own; the naive twin, a
-- "shadow" that records every admitted request, over-counts.  On a pinned
-- clock (redis_primitives.ratelimit_clock_ms), so every number is exact.
BEGIN;
SELECT plan(29);

CREATE FUNCTION pg_temp.at(ms bigint) RETURNS text LANGUAGE sql AS $$
  SELECT set_config('redis_primitives.ratelimit_clock_ms', (1700000000000 + ms)::text, true)
$$;
SELECT pg_temp.at(0);

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
SELECT rp_ratelimit_peek('bool', 2, 60000, 1, 'gcra');
SELECT is(rp_ratelimit_shadow_refusals('bool'), 3::bigint, 'a peek counts nothing');
SELECT is((SELECT row(allowed, retry_after_ms, would_refuse)::text FROM rp_ratelimit_consume('bool', 2, 60000, 3, 'gcra', 'shadow')),
          '(t,-1,t)', 'a cost above max_requests: admitted in shadow, would_refuse, never retryable');
SELECT is(rp_ratelimit_shadow_refusals('bool'), 4::bigint, 'and counted');
SELECT is(rp_ratelimit_reset('bool'), true, 'rp_ratelimit_reset');
SELECT is(rp_ratelimit_shadow_refusals('bool'), 0::bigint, 'clears the count too');

-- Bad input, and the 1.0 form unchanged.
SELECT throws_ok($$SELECT rp_ratelimit('k', 2, 60000, 1, 'gcra', 'dry-run')$$, '22023', NULL, 'an unknown mode is 22023');
SELECT throws_ok($$SELECT rp_ratelimit_consume('k', 2, 60000, 1, 'gcra', NULL)$$, '22004', NULL, 'a NULL mode is 22004');
SELECT is((SELECT count(*) FROM rp_ratelimit_consume('k', 2, 60000) r, LATERAL jsonb_object_keys(to_jsonb(r))), 4::bigint,
          'the 1.0 form still returns the 1.0 record');

SELECT * FROM finish();
ROLLBACK;
