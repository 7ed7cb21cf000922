-- Leader election: the epoch is what stands between a deposed leader and the
-- data.  The story: node a leads and writes with its epoch; its lease lapses
-- (a GC pause, a stalled VM); node b is elected and writes; a, which still
-- believes it leads, writes too.  A table that only trusts "I checked that I
-- am leader" lets a overwrite b; a fenced table refuses a's epoch.
BEGIN;
SELECT plan(29);

-- Campaigning while already leader renews without changing the epoch.
SELECT isnt(rp_campaign('tap-job', 'a', 10000), NULL, 'a wins the election');
CREATE TEMP TABLE term AS SELECT epoch FROM rp_leader('tap-job');
SELECT is(rp_campaign('tap-job', 'a', 60000), (SELECT epoch FROM term),
          'campaigning again renews with the same epoch');
SELECT ok((SELECT ttl_ms > 10000 FROM rp_leader('tap-job')), 'and the lease was renewed');
SELECT is(rp_campaign('tap-job', 'b', 10000), NULL, 'b cannot win while a leads');
SELECT ok(rp_is_leader('tap-job', 'a') AND NOT rp_is_leader('tap-job', 'b'),
          'Redis says a leads, b does not');

-- Only the leader can resign.
SELECT is(rp_resign('tap-job', 'b'), false, 'b cannot resign a''s leadership');
SELECT is((SELECT node_id FROM rp_leader('tap-job')), 'a', 'a still leads');
SELECT is(rp_resign('tap-job', 'a'), true, 'the leader resigns');
SELECT is((SELECT node_id FROM rp_leader('tap-job')), NULL, 'nobody leads after resigning');
SELECT cmp_ok(rp_campaign('tap-job', 'b', 10000), '>', (SELECT epoch FROM term),
              'the next leader''s epoch is higher');
SELECT ok(rp_resign('tap-job', 'b'), 'b resigns too');

-- A renewal never hands back an epoch below its floor.  A caller that passes
-- a floor above its own term's epoch has seen a newer one (it led in another
-- Redis or database meanwhile, or this Redis lost its counter): renewing
-- would stamp the older epoch after the newer, and a fenced table would
-- refuse the only leader.  The term is replaced by one above the floor.
SELECT isnt(rp_campaign('tap-floor', 'a', 60000), NULL, 'a leads tap-floor');
CREATE TEMP TABLE floor_term AS SELECT epoch FROM rp_leader('tap-floor');
SELECT is(rp_campaign('tap-floor', 'a', 60000, (SELECT epoch + 10 FROM floor_term)),
          (SELECT epoch + 11 FROM floor_term),
          'a renewal under a floor above its epoch begins a new term above the floor');
SELECT is((SELECT node_id || ' ' || epoch FROM rp_leader('tap-floor')),
          (SELECT 'a ' || (epoch + 11) FROM floor_term),
          'Redis holds that new term, for a');
SELECT is(rp_campaign('tap-floor', 'a', 60000, (SELECT epoch + 11 FROM floor_term)),
          (SELECT epoch + 11 FROM floor_term),
          'a renewal whose floor is its own epoch keeps the term');
SELECT ok(rp_resign('tap-floor', 'a'), 'a resigns tap-floor');

-- A deposed leader.  a leads with a short lease and writes.
CREATE TEMP TABLE epochs (node text PRIMARY KEY, epoch bigint);
-- A lease of 60 s, so that a's check below falls inside it however slow the
-- machine; only then does a's lease become short (its renewal for 300 ms).
INSERT INTO epochs SELECT 'a', rp_campaign('tap-sched', 'a', 60000);
-- The naive twin checks "am I the leader?" and writes when the answer was
-- yes.  a checks now, then stalls past its lease; b is elected and writes.
CREATE TEMP TABLE a_checked AS SELECT rp_is_leader('tap-sched', 'a') AS leads;
SELECT rp_campaign('tap-sched', 'a', 300);  -- a renews for 300 ms, after its check
CREATE TEMP TABLE naive_schedule (id int PRIMARY KEY, owner text, epoch bigint);
CREATE TEMP TABLE fenced_schedule (id int PRIMARY KEY, owner text, epoch bigint);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON fenced_schedule
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('epoch');
INSERT INTO naive_schedule SELECT 1, 'a', epoch FROM epochs WHERE node = 'a';
INSERT INTO fenced_schedule SELECT 1, 'a', epoch FROM epochs WHERE node = 'a';
SELECT ok(rp_fenced_write('tap-sched', '"a"', (SELECT epoch FROM epochs WHERE node = 'a')),
          'the leader''s write is accepted');

-- a stalls past its lease; b is elected and writes with its epoch.
SELECT pg_sleep(0.4);
INSERT INTO epochs SELECT 'b', rp_campaign('tap-sched', 'b', 10000);
SELECT ok((SELECT epoch FROM epochs WHERE node = 'b') > (SELECT epoch FROM epochs WHERE node = 'a'),
          'b is elected after a''s lease lapsed, with a higher epoch');
SELECT ok(rp_fenced_write('tap-sched', '"b"', (SELECT epoch FROM epochs WHERE node = 'b')),
          'the new leader''s write is accepted by rp_fenced_write');
UPDATE naive_schedule SET owner = 'b', epoch = (SELECT epoch FROM epochs WHERE node = 'b');
UPDATE fenced_schedule SET owner = 'b', epoch = (SELECT epoch FROM epochs WHERE node = 'b');

-- a wakes up, still believing it leads, and writes with its old epoch.
UPDATE naive_schedule SET owner = 'a', epoch = (SELECT epoch FROM epochs WHERE node = 'a')
  WHERE (SELECT leads FROM a_checked);
SELECT is((SELECT leads || '/' || owner FROM a_checked, naive_schedule), 'true/a',
          'naive: a checked it led, stalled, wrote anyway, and overwrote the new leader');
SELECT is(rp_fenced_write('tap-sched', '"a"', (SELECT epoch FROM epochs WHERE node = 'a')), false,
          'rp_fenced_write refuses the deposed leader''s epoch');
SELECT is((SELECT value FROM rp_fenced_read('tap-sched')), '"b"'::jsonb,
          'the fenced store keeps the new leader''s value');
SELECT throws_ok(
  format('UPDATE fenced_schedule SET owner = %L, epoch = %s', 'a',
         (SELECT epoch FROM epochs WHERE node = 'a')),
  'RP001', NULL, 'a table with rp_fence_guard refuses the deposed leader''s write');
SELECT is((SELECT owner FROM fenced_schedule), 'b', 'the fenced table keeps the new leader''s row');

-- rp_is_leader(name) is the background elector's answer: for an election it
-- does not run, an error with a hint, never a quiet false.
SELECT throws_ok($$SELECT rp_is_leader('not-an-election')$$, '42704',
                 'election "not-an-election" is not run by this server''s elector',
                 'rp_is_leader(name) for an election the elector does not run is an error');

SELECT ok(rp_resign('tap-sched', 'b'), 'the new leader resigns');

-- A session's key_prefix of any length keys its locks; elections are keyed
-- by the server-wide prefix (test/scenarios/leases_never_stranded.sh checks
-- one too long to share).
SELECT lives_ok($$SET LOCAL redis_primitives.key_prefix = '$$ || repeat('p', 299) || $$:'$$,
                'a session key_prefix of 300 bytes is accepted');
SELECT is((SELECT fence FROM rp_acquire_xact('tap-long-prefix', 10000)) > 0, true,
          'a lock is taken under it');
SELECT is(rp_campaign('tap-long-prefix', 'a', 10000) > 0, true,
          'and an election works, under the server-wide prefix');
SELECT * FROM finish();
ROLLBACK;
