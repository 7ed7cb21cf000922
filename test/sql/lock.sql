-- The lease lock, deterministic behaviour.  Keys are under a prefix of
-- this file's own (below), so fence tokens start at 1.
\pset null '(null)'
-- Counters in Redis outlive a run (a fence never goes back) and the
-- suite may run against a Redis that an earlier run used (make
-- installcheck): this file's keys are under a key prefix of its own.
DO $$ BEGIN PERFORM set_config('redis_primitives.key_prefix',
  'rp-regress:' || gen_random_uuid() || ':', false); END $$;

-- A lease is taken once.  Re-entry is per transaction: a later statement (a
-- later transaction) asking for the name is refused like any other caller,
-- since behind a pool it may be another client's request (1.2).
SELECT name, fence, length(token) AS token_len,
       expires_at > now() AS in_future
FROM rp_acquire('acct-1', 10000);
SELECT (rp_acquire('acct-1', 10000)).fence AS later_transaction_refused;

-- What Redis holds, without the token.
SELECT held, fence, ttl_ms BETWEEN 1 AND 10000 AS ttl_ok, last_fence
FROM rp_lock_info('acct-1');

-- The session remembers it.
SELECT name, fence FROM rp_leases();

-- Release by name; then there is nothing left to release.
SELECT rp_release('acct-1');
SELECT rp_release('acct-1');
SELECT held, fence, ttl_ms, last_fence FROM rp_lock_info('acct-1');
SELECT count(*) FROM rp_leases();

-- Fence tokens strictly increase across acquisitions of a name.
SELECT (rp_acquire('acct-1', 10000)).fence;
SELECT rp_release_all();
SELECT (rp_acquire('acct-1', 10000)).fence;
SELECT rp_release_all();

-- floor raises the counter first: never a token at or below it.
SELECT (rp_acquire('acct-1', 10000, 0, 100)).fence;
SELECT rp_release('acct-1');
-- a floor below the counter changes nothing
SELECT (rp_acquire('acct-1', 10000, 0, 5)).fence;
SELECT rp_release('acct-1');

-- Tokens above 2^53 come back exact (a Lua number would round them).
SELECT (rp_acquire('huge', 10000, 0, 4611686018427387904)).fence;
SELECT rp_release('huge');
SELECT (rp_acquire('huge', 10000)).fence;
SELECT rp_release('huge');
SELECT (rp_acquire('huge', 10000, 0, 9223372036854775805)).fence;
SELECT rp_release('huge');
-- the last token is 2^63 - 1; after it the counter refuses, rather than wrap
SELECT (rp_acquire('huge', 10000)).fence;
SELECT rp_release('huge');
\set VERBOSITY terse
SELECT rp_acquire('huge', 10000);
\set VERBOSITY default
SELECT held, last_fence FROM rp_lock_info('huge');

-- Release by lease: compare-and-delete.  A forged token releases nothing.
CREATE TEMP TABLE l AS SELECT rp_acquire('acct-2', 10000) AS lease;
SELECT rp_release(ROW((lease).name, 'forged-token', (lease).fence, (lease).expires_at)::rp_lease) FROM l;
SELECT held FROM rp_lock_info('acct-2');
SELECT rp_release(lease) FROM l;
SELECT rp_release(lease) FROM l;
SELECT held FROM rp_lock_info('acct-2');

-- Extend keeps the fence and pushes expires_at; NULL once the lease is gone.
TRUNCATE l;
INSERT INTO l SELECT rp_acquire('acct-3', 1000);
SELECT (e).fence = (lease).fence AS same_fence, (e).expires_at > (lease).expires_at AS later,
       (e).token = (lease).token AS same_token
FROM (SELECT lease, rp_extend(lease, 60000) AS e FROM l) s;
SELECT ttl_ms > 1000 AS extended FROM rp_lock_info('acct-3');
SELECT rp_release(lease) FROM l;
SELECT rp_extend(lease, 1000) IS NULL AS extend_after_release_is_null FROM l;

-- rp_release_all counts what it released.
SELECT count(*) FROM (SELECT rp_acquire('many-' || i, 10000) FROM generate_series(1, 5) i) s;
SELECT rp_release_all();
SELECT count(*) FROM rp_leases();

-- Names that look like key syntax are distinct locks.
SELECT (rp_acquire(n, 10000)).fence IS NOT NULL AS acquired, n
FROM unnest(ARRAY['a', 'a}', '{a', 'a:lock', 'a:fence', E'a\nb', 'ä', 'å', '名前', ' a']) n
ORDER BY n COLLATE "C";
SELECT count(*) FROM rp_leases();
SELECT rp_release_all();

-- A 1 MB name works and is a lock like any other.
SELECT (rp_acquire(repeat('x', 1048576), 10000)).fence IS NOT NULL AS big_name_acquired;
SELECT held FROM rp_lock_info(repeat('x', 1048576));
SELECT rp_release(repeat('x', 1048576));

-- Diagnostics.
SELECT rtt_ms >= 0 AS rtt_ok, redis_version ~ '^[0-9]+\.' AS version_ok FROM rp_ping();
