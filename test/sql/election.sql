-- Leader election through SQL, deterministic behaviour.  The names are
-- this run's own (below), so the fence counter of each name starts at 0.
\pset null '(null)'
-- Epochs live in Redis and never go back, and the suite may run against a
-- Redis that an earlier run used (make installcheck): the names campaigned
-- for are this run's own.  (Not a key prefix of its own: an election's keys
-- are under the server's key_prefix while its elector runs, and the lock of
-- an election's name must be the same key.)
SELECT 'cron-' || gen_random_uuid() AS cron \gset
SELECT 'C' || substr(:'cron', 2) AS ucron, 'short' || substr(:'cron', 5) AS short \gset

-- Nobody leads yet.
SELECT * FROM rp_leader(:'cron');
SELECT rp_is_leader(:'cron', 'node-a');

-- node-a campaigns and wins epoch 1; node-b is refused (NULL, not an error).
SELECT rp_campaign(:'cron', 'node-a', 10000) AS epoch_a;
SELECT rp_campaign(:'cron', 'node-b', 10000) AS epoch_b;
SELECT node_id, epoch, ttl_ms BETWEEN 1 AND 10000 AS ttl_ok FROM rp_leader(:'cron');
SELECT rp_is_leader(:'cron', 'node-a') AS a_leads, rp_is_leader(:'cron', 'node-b') AS b_leads;

-- Campaigning again renews the lease and keeps the epoch.
SELECT rp_campaign(:'cron', 'node-a', 60000) AS renewed_epoch;
SELECT epoch, ttl_ms > 10000 AS lease_renewed FROM rp_leader(:'cron');

-- Only the leader can resign.
SELECT rp_resign(:'cron', 'node-b') AS b_resigns;
SELECT rp_resign(:'cron', 'node-a') AS a_resigns;
SELECT rp_resign(:'cron', 'node-a') AS a_resigns_again;
SELECT * FROM rp_leader(:'cron');

-- The next leader gets a higher epoch: epochs never repeat.
SELECT rp_campaign(:'cron', 'node-b', 10000) AS epoch_b;
SELECT node_id, epoch FROM rp_leader(:'cron');

-- An election is the lock of its name held by a node (docs/decisions/0004):
-- while node-b leads, the lock of its name is held, rp_lock_info reports the
-- leader's epoch as the holder's fence, and an acquire gets nothing (in 1.0
-- it got the next token, making the leader's epoch stale at fenced tables).
SELECT held, fence = (SELECT epoch FROM rp_leader(:'cron')) AS fence_is_epoch FROM rp_lock_info(:'cron');
SELECT rp_acquire(:'cron', 10000) IS NULL AS lock_refused_while_led;
SELECT rp_resign(:'cron', 'node-b');
SELECT (rp_acquire(:'cron', 10000)).fence AS lock_fence;
SELECT rp_campaign(:'cron', 'node-a', 10000) AS campaign_refused_while_locked;
SELECT rp_release(:'cron');
SELECT rp_campaign(:'cron', 'node-a', 10000) AS epoch_after_lock;

-- A floor: a new term's epoch is above it (a counter lost in Redis).
SELECT rp_resign(:'cron', 'node-a');
SELECT rp_campaign(:'cron', 'node-a', 10000, 100) AS epoch_above_floor;
SELECT rp_campaign(:'cron', 'node-a', 10000, -1);

-- A lapsed lease: another node may take over, with a new epoch.
SELECT rp_campaign(:'short', 'node-a', 50) AS epoch_a;
SELECT pg_sleep(0.2);
SELECT * FROM rp_leader(:'short');
SELECT rp_campaign(:'short', 'node-b', 10000) AS epoch_b;
SELECT rp_campaign(:'short', 'node-a', 10000) AS a_refused;

-- Names are case-sensitive and any text.
SELECT rp_campaign(:'ucron', 'node-a', 10000) AS other_name;
SELECT rp_resign(:'ucron', 'node-a');

-- Argument errors: NULL is 22004, out of range or empty is 22023.
\set VERBOSITY sqlstate
SELECT rp_campaign(NULL, 'node-a', 1000);
SELECT rp_campaign('cron', NULL, 1000);
SELECT rp_campaign('cron', 'node-a', NULL);
SELECT rp_campaign('cron', 'node-a', 0);
SELECT rp_campaign('cron', 'node-a', -5);
SELECT rp_campaign('', 'node-a', 1000);
SELECT rp_campaign('cron', '', 1000);
SELECT rp_resign(NULL, 'node-a');
SELECT rp_resign('cron', NULL);
SELECT rp_is_leader('cron', NULL);
SELECT rp_is_leader(NULL, 'node-a');
SELECT rp_leader(NULL);
SELECT rp_leader('');
SELECT rp_is_leader(NULL::text);
\set VERBOSITY default

-- rp_is_leader(name) answers for the background elector only: an election
-- it does not run is an error with a hint, never false.
SELECT rp_is_leader('cron');
SELECT count(*) AS cron_run FROM rp_elections() WHERE name = 'cron';

SELECT rp_resign(:'cron', 'node-a'), rp_resign(:'short', 'node-b');
