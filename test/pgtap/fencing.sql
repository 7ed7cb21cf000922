-- Fencing, in four cases, against real Redis and a real table: the stale
-- write refused, the naive twin without fencing losing the new holder's
-- write, the honest limit (a stale writer that gets there first is
-- accepted), and the counter lost (the same token issued twice).  They are
-- the cases the TypeScript redis-primitives library tests its FencedStore
-- with, here with PostgreSQL as the resource.
--
-- A 200 ms lease, 350 ms of work, a second holder acquiring at about 220 ms.
-- One session plays both holders: the lock lives in Redis, not in the
-- session, so the second acquire succeeds exactly when Redis has expired the
-- first lease.
BEGIN;
SELECT plan(14);

CREATE TABLE account (id int PRIMARY KEY, balance int NOT NULL, fence_token bigint);
CREATE TRIGGER account_fence BEFORE INSERT OR UPDATE ON account
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token');
CREATE TABLE account_plain (id int PRIMARY KEY, balance int NOT NULL, fence_token bigint);
INSERT INTO account VALUES (42, 100, 0);
INSERT INTO account_plain VALUES (42, 100, 0);
CREATE TEMP TABLE lease (who text PRIMARY KEY, l rp_lease);

-- Case 1: the lease expires mid-work; the stale write is refused.
INSERT INTO lease SELECT 'A', rp_acquire('account-42', 200);
SELECT ok((SELECT (l).fence FROM lease WHERE who = 'A') IS NOT NULL, 'A acquires a 200 ms lease');
SELECT pg_sleep(0.22);
INSERT INTO lease SELECT 'B', rp_acquire('account-42', 10000);
SELECT ok((SELECT (l).fence FROM lease WHERE who = 'B') > (SELECT (l).fence FROM lease WHERE who = 'A'),
          'at 220 ms B acquires with a higher fence token');
UPDATE account SET balance = 50, fence_token = (SELECT (l).fence FROM lease WHERE who = 'B') WHERE id = 42;
SELECT pg_sleep(0.13);  -- A's work ends at 350 ms
SELECT throws_ok(
  format('UPDATE account SET balance = 90, fence_token = %s WHERE id = 42',
         (SELECT (l).fence FROM lease WHERE who = 'A')),
  'RP001', 'stale fence token for table "account"',
  'A''s write at 350 ms is refused by the trigger');
SELECT is((SELECT balance FROM account WHERE id = 42), 50, 'B''s value survives');
SELECT is(rp_release((SELECT l FROM lease WHERE who = 'A')), false,
          'A''s release deletes nothing: the key is B''s');
SELECT is(rp_release((SELECT l FROM lease WHERE who = 'B')), true, 'B releases its own lease');

-- Case 2: the naive twin.  A does what a careful user without fencing does:
-- it checks that it still holds its lease (rp_extend succeeds only for the
-- holder) and writes when the check said yes.  The pause falls between the
-- check and the write, as a GC pause or a slow network would.
-- A's lease is long until the check, which leaves it 200 ms (rp_extend sets
-- the TTL): on a slow machine the check still falls inside the lease.
TRUNCATE lease;
INSERT INTO lease SELECT 'A', rp_acquire('account-42', 60000);
CREATE TEMP TABLE a_checked AS SELECT rp_extend((SELECT l FROM lease WHERE who = 'A'), 200) IS NOT NULL AS still_mine;
SELECT pg_sleep(0.22);
INSERT INTO lease SELECT 'B', rp_acquire('account-42', 10000);
UPDATE account_plain SET balance = 50, fence_token = (SELECT (l).fence FROM lease WHERE who = 'B') WHERE id = 42;
SELECT pg_sleep(0.13);
UPDATE account_plain SET balance = 90, fence_token = (SELECT (l).fence FROM lease WHERE who = 'A')
  WHERE id = 42 AND (SELECT still_mine FROM a_checked);
SELECT is((SELECT still_mine FROM a_checked), true,
          'naive: A checked that it still held its lease before writing');
SELECT is((SELECT balance FROM account_plain WHERE id = 42), 90,
          'naive: after the pause A writes anyway, and B''s value is silently clobbered');
SELECT rp_release_all();

-- Case 3: the honest limit.  Fencing orders writes; it does not detect
-- staleness.  A stale writer that gets there first is accepted.
TRUNCATE lease;
INSERT INTO lease SELECT 'A', rp_acquire('account-42', 200);
SELECT pg_sleep(0.22);
INSERT INTO lease SELECT 'B', rp_acquire('account-42', 10000);
UPDATE account SET balance = 70, fence_token = (SELECT (l).fence FROM lease WHERE who = 'A') WHERE id = 42;
SELECT is((SELECT balance FROM account WHERE id = 42), 70,
  'A''s stale write lands when B has not written yet (the honest limit)');
UPDATE account SET balance = 60, fence_token = (SELECT (l).fence FROM lease WHERE who = 'B') WHERE id = 42;
SELECT is((SELECT balance FROM account WHERE id = 42), 60,
  'B''s later write is accepted over it');
SELECT throws_ok(
  format('UPDATE account SET balance = 80, fence_token = %s WHERE id = 42',
         (SELECT (l).fence FROM lease WHERE who = 'A')),
  'RP001', NULL, 'once B has written, A is refused');
SELECT rp_release_all();

-- Case 4: the counter must never be lost.  Delete it and the same token is
-- issued twice; with floor taken from the fenced table it never is.
TRUNCATE lease;
INSERT INTO lease SELECT 'A', rp_acquire('ledger', 10000);
SELECT rp_release('ledger');
SELECT rp_test.redis('DEL', rp_test.key('ledger', 'fence'));
INSERT INTO lease SELECT 'B', rp_acquire('ledger', 10000);
SELECT is((SELECT (l).fence FROM lease WHERE who = 'B'), (SELECT (l).fence FROM lease WHERE who = 'A'),
          'with the counter deleted, the same token is handed to a second holder');
SELECT rp_release('ledger');
UPDATE account SET fence_token = 500 WHERE id = 42;
SELECT rp_test.redis('DEL', rp_test.key('ledger', 'fence'));
INSERT INTO lease SELECT 'C', rp_acquire('ledger', 10000, 0,
  (SELECT max(fence_token) FROM account));
SELECT cmp_ok((SELECT (l).fence FROM lease WHERE who = 'C'), '>', 500::bigint,
              'with floor taken from the table, the token is above every token the table has seen');
UPDATE account SET balance = 1, fence_token = (SELECT (l).fence FROM lease WHERE who = 'C') WHERE id = 42;
SELECT is((SELECT balance || '/' || fence_token FROM account WHERE id = 42),
          '1/' || (SELECT (l).fence FROM lease WHERE who = 'C'),
  'and the new holder''s write is accepted: the row holds its value and token');
SELECT rp_release_all();

SELECT * FROM finish();
ROLLBACK;
