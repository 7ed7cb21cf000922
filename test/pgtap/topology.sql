-- Topology: the database-side fence floor, the slot function, and settings
-- that must be refused before they can misroute a call.
BEGIN;
SELECT plan(13);

-- rp_fence_floor: the highest token a guarded table holds.
CREATE TABLE ledger (id int PRIMARY KEY, fence_token bigint);
CREATE TRIGGER ledger_fence BEFORE INSERT OR UPDATE ON ledger
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token');
CREATE TABLE unguarded (id int, fence_token bigint);

SELECT is(rp_fence_floor('ledger'), 0::bigint, 'an empty guarded table: floor 0');
INSERT INTO ledger VALUES (1, 17), (2, 40), (3, 5);
SELECT is(rp_fence_floor('ledger'), 40::bigint, 'the floor is the highest token any row carries');
SELECT throws_ok($$SELECT rp_fence_floor('unguarded')$$, '22023', NULL,
                 'a table without rp_fence_guard has no floor to give');
SELECT throws_ok($$SELECT rp_fence_floor(NULL)$$, '22004', NULL, 'NULL table: 22004');

-- A fresh counter (as after a failover that lost it) would start at 1; with
-- the table's floor it starts above every token the table holds.
SELECT ok((rp_acquire('topo-ledger', 10000, 0, rp_fence_floor('ledger'))).fence = 41,
          'acquire with floor => rp_fence_floor(table): token 41, above every row');
SELECT rp_release('topo-ledger');
SELECT is((SELECT count(*)::int FROM (SELECT 1) s WHERE rp_fence_floor('rp_fenced_store') >= 0), 1,
          'rp_fenced_store has a floor too');

-- rp_key_slot: the examples of the Redis Cluster specification.
SELECT is(rp_key_slot('foo'), 12182, 'slot of foo');
SELECT is(rp_key_slot('{user1000}.following'), rp_key_slot('{user1000}.followers'),
          'keys with one hash tag share a slot');
SELECT is(rp_key_slot('{user1000}.following'), 3443, 'slot of {user1000}.following, as CLUSTER KEYSLOT says');
SELECT is(rp_key_slot('rp:{account-42}:lock'), rp_key_slot('account-42'),
          'a lock key goes where its name''s tag goes');

-- Settings.
SELECT throws_ok($$SET redis_primitives.sentinels = '127.0.0.1'$$, '22023', NULL,
                 'a sentinel without a port is refused');
SELECT lives_ok($$SET LOCAL redis_primitives.sentinels = '127.0.0.1:26379, 127.0.0.2:26380'$$,
                'host:port entries separated by commas are accepted');
SET LOCAL redis_primitives.cluster = on;
SELECT throws_ok($$SELECT rp_lock_info('x')$$, '22023', NULL,
                 'cluster and sentinels together are refused at the first call');

SELECT * FROM finish();
ROLLBACK;
