-- rp_acquire_all / rp_acquire_all_xact (docs/lock.md, "Many locks at once"):
-- many locks, all or nothing, in one round trip; each name its own lease and
-- fence.
BEGIN;
SELECT plan(32);

-- All of them: one lease per name, in the order given, each in Redis.
CREATE TEMP TABLE got AS SELECT rp_acquire_all(ARRAY['all-a', 'all-b', 'all-c'], 10000) AS l;
SELECT is(array_length((SELECT l FROM got), 1), 3, 'three names, three leases');
SELECT is((SELECT array_agg(x.name ORDER BY o) FROM got, unnest(l) WITH ORDINALITY AS x(name, token, fence, expires_at, o)),
          ARRAY['all-a', 'all-b', 'all-c'], 'in the order of the names');
SELECT is((SELECT count(DISTINCT x.token) FROM got, unnest(l) x), 3::bigint, 'each lease has its own token');
SELECT ok((SELECT bool_and(x.fence > 0 AND x.expires_at > now()) FROM got, unnest(l) x), 'each has a fence and a deadline');
SELECT is((SELECT bool_and((rp_lock_info(x.name)).held AND (rp_lock_info(x.name)).fence = x.fence)
           FROM got, unnest(l) x), true, 'Redis holds each name with that fence');
SELECT is((SELECT bool_and(rp_test.redis('GET', rp_test.key(x.name, 'lock')) = x.token) FROM got, unnest(l) x),
          true, 'under that lease''s own token');
SELECT is((SELECT count(*) FROM rp_leases() WHERE name LIKE 'all-%'), 3::bigint, 'the session''s registry has all three');

-- A name the session holds is returned as it is (no waiting on itself).
SELECT is((SELECT (rp_acquire_all(ARRAY['all-c', 'all-d'], 10000))[1]), (SELECT l[3] FROM got),
          'a name already held comes back as the same lease');
SELECT is(rp_release_all(), 4, 'rp_release_all releases all four');
SELECT is((rp_lock_info('all-a')).held, false, 'and Redis holds none of them');

-- All or nothing: one name held by someone else, nothing is taken.
SELECT is(rp_test.redis('SET', rp_test.key('aon-2', 'lock'), 'other', 'PX', '10000'), 'OK', 'another client holds aon-2');
CREATE TEMP TABLE fence_before AS
  SELECT n, coalesce(rp_test.redis('GET', rp_test.key(n, 'fence')), '') AS f FROM unnest(ARRAY['aon-1', 'aon-2', 'aon-3']) n;
SELECT is(rp_acquire_all(ARRAY['aon-1', 'aon-2', 'aon-3'], 10000), NULL, 'NULL: not acquired');
SELECT is((rp_lock_info('aon-1')).held OR (rp_lock_info('aon-3')).held, false, 'the free names were not taken');
SELECT is((SELECT count(*) FROM fence_before WHERE coalesce(rp_test.redis('GET', rp_test.key(n, 'fence')), '') <> f),
          0::bigint, 'no fence counter moved');
SELECT is((SELECT count(*) FROM rp_leases() WHERE name LIKE 'aon-%'), 0::bigint, 'the registry holds none');

-- The naive twin: taking them one by one keeps a subset when one is held.
SELECT ok(rp_acquire('aon-1', 10000) IS NOT NULL AND rp_acquire('aon-2', 10000) IS NULL,
          'naive: one rp_acquire per name takes aon-1 and then fails on aon-2');
SELECT is((rp_lock_info('aon-1')).held, true, 'naive: and holds aon-1 while it has not got aon-2');
SELECT rp_release_all();
SELECT rp_test.redis('DEL', rp_test.key('aon-2', 'lock'));

-- floor: every counter is raised first.
SELECT ok((SELECT bool_and(x.fence = 1001) FROM unnest(rp_acquire_all(ARRAY['fl-1', 'fl-2'], 10000, 0, 1000)) x),
          'floor 1000: each name''s first fence is 1001');
SELECT rp_release_all();

-- Bad input: an error, never a NULL that reads as "not acquired".
SELECT throws_ok($$SELECT rp_acquire_all(NULL, 1000)$$, '22004', NULL, 'NULL names: 22004');
SELECT throws_ok($$SELECT rp_acquire_all(ARRAY['x', NULL], 1000)$$, '22004', NULL, 'a NULL name: 22004');
SELECT throws_ok($$SELECT rp_acquire_all('{}'::text[], 1000)$$, '22023', NULL, 'no names: 22023');
SELECT throws_ok($$SELECT rp_acquire_all(ARRAY(SELECT 'n' || g FROM generate_series(1, 101) g), 1000)$$, '22023',
                 'rp_acquire_all takes between 1 and 100 lock names, got 101', '101 names: 22023');
SELECT throws_ok($$SELECT rp_acquire_all(ARRAY['x', ''], 1000)$$, '22023', NULL, 'an empty name: 22023');
SELECT throws_ok($$SELECT rp_acquire_all(ARRAY['x', 'y', 'x'], 1000)$$, '22023', 'lock name "x" appears twice', 'a name twice: 22023');
SELECT throws_ok($$SELECT rp_acquire_all(ARRAY['x'], 0)$$, '22023', NULL, 'ttl_ms 0: 22023');
SELECT throws_ok($$SELECT rp_acquire_all(ARRAY['x'], 1000, NULL)$$, '22004', NULL, 'NULL wait_ms: 22004');
SELECT is((rp_lock_info('x')).held, false, 'a refused call took nothing');

-- A held name is returned as it is only while its lease is live: one that
-- expires while the call waits for the others is taken anew, never handed
-- back expired (it may be someone else's by then).
SELECT ok(rp_acquire('exp-a', 300) IS NOT NULL, 'the session holds exp-a for 300 ms');
SELECT is(rp_test.redis('SET', rp_test.key('exp-b', 'lock'), 'other', 'PX', '1500'), 'OK',
          'another client holds exp-b for 1.5 s');
CREATE TEMP TABLE waited AS SELECT rp_acquire_all(ARRAY['exp-a', 'exp-b'], 10000, 8000) AS l;
SELECT ok((SELECT (l[1]).expires_at > clock_timestamp() FROM waited),
          'after the wait for exp-b, exp-a comes back with a live deadline');
SELECT is(rp_test.redis('GET', rp_test.key('exp-a', 'lock')), (SELECT (l[1]).token FROM waited),
          'and Redis holds exp-a under the token returned');
SELECT rp_release_all();

-- _xact: released when the (sub)transaction ends.
SAVEPOINT s;
SELECT rp_acquire_all_xact(ARRAY['xa-1', 'xa-2'], 10000);
ROLLBACK TO SAVEPOINT s;
SELECT is((rp_lock_info('xa-1')).held OR (rp_lock_info('xa-2')).held, false,
          'rp_acquire_all_xact: both released when the subtransaction rolls back');

SELECT * FROM finish();
ROLLBACK;
