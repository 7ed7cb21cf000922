-- Fencing enforced by PostgreSQL: the trigger and the fenced store.
\pset null '(null)'
-- Counters in Redis outlive a run (a fence never goes back) and the
-- suite may run against a Redis that an earlier run used (make
-- installcheck): this file's keys are under a key prefix of its own.
DO $$ BEGIN PERFORM set_config('redis_primitives.key_prefix',
  'rp-regress:' || gen_random_uuid() || ':', false); END $$;

CREATE TABLE account (id int PRIMARY KEY, balance int, fence_token bigint);
CREATE TRIGGER account_fence BEFORE INSERT OR UPDATE ON account
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token');

INSERT INTO account VALUES (42, 100, 5);
-- a newer token writes
UPDATE account SET balance = 90, fence_token = 7 WHERE id = 42;
-- the same token writes again (the same holder may write twice)
UPDATE account SET balance = 80, fence_token = 7 WHERE id = 42;
-- a stale token is refused with RP001, and the row keeps the newer write
UPDATE account SET balance = 1000, fence_token = 6 WHERE id = 42;
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM account;
-- a NULL token is refused, on UPDATE and on INSERT
UPDATE account SET fence_token = NULL WHERE id = 42;
INSERT INTO account VALUES (43, 1, NULL);
-- an INSERT without a token column value is refused
INSERT INTO account (id, balance) VALUES (44, 1);
-- an UPDATE that leaves the token untouched carries the stored one: allowed
UPDATE account SET balance = 70 WHERE id = 42;
SELECT * FROM account;

-- 'skip' mode: a stale row change is dropped, row count 0, like
-- UPDATE ... WHERE fence_token <= $token.
CREATE TABLE doc (id int PRIMARY KEY, body text, fence int);
CREATE TRIGGER doc_fence BEFORE INSERT OR UPDATE ON doc
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence', 'skip');
INSERT INTO doc VALUES (1, 'v10', 10), (2, 'v3', 3);
UPDATE doc SET body = 'stale', fence = 9;
SELECT * FROM doc ORDER BY id;
WITH u AS (UPDATE doc SET body = 'stale2', fence = 2 WHERE id = 2 RETURNING 1)
SELECT count(*) AS rows_changed FROM u;

-- Misuse is refused clearly.
CREATE TABLE t (id int, f bigint, txt text, n numeric);
CREATE TRIGGER bad AFTER INSERT ON t FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('f');
INSERT INTO t VALUES (1, 1);
DROP TRIGGER bad ON t;
CREATE TRIGGER bad BEFORE INSERT ON t FOR EACH STATEMENT EXECUTE FUNCTION rp_fence_guard('f');
INSERT INTO t VALUES (1, 1);
DROP TRIGGER bad ON t;
CREATE TRIGGER bad BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('nope');
INSERT INTO t VALUES (1, 1);
DROP TRIGGER bad ON t;
CREATE TRIGGER bad BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('txt');
INSERT INTO t VALUES (1, 1);
DROP TRIGGER bad ON t;
CREATE TRIGGER bad BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('n');
INSERT INTO t VALUES (1, 1);
DROP TRIGGER bad ON t;
CREATE TRIGGER bad BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION rp_fence_guard();
INSERT INTO t VALUES (1, 1);
DROP TRIGGER bad ON t;
CREATE TRIGGER bad BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('f', 'ignore');
INSERT INTO t VALUES (1, 1);
DROP TRIGGER bad ON t;
CREATE TRIGGER bad BEFORE DELETE ON t FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('f');
INSERT INTO t VALUES (1, 1);
DELETE FROM t;
DROP TRIGGER bad ON t;
SELECT rp_fence_guard();

-- The fenced store.
SELECT rp_fenced_write('schedule', '{"v": 1}', 3);
SELECT rp_fenced_write('schedule', '{"v": 2}', 5);
SELECT rp_fenced_write('schedule', '{"v": "stale"}', 4);
SELECT rp_fenced_write('schedule', '{"v": 3}', 5);
SELECT value, fence FROM rp_fenced_read('schedule');
SELECT value, fence FROM rp_fenced_read('nothing-here');

-- 1.1: a lock-bound guard checks again at commit.  A write takes effect at
-- commit: one committed after its lease ran out, or after the lease was
-- released, is rolled back with RP004 (the naive token guard commits it).
SET redis_primitives.lease_margin = 50;
CREATE TABLE ledger (id int PRIMARY KEY, v int, fence_token bigint);
CREATE TRIGGER ledger_fence BEFORE INSERT OR UPDATE OR DELETE ON ledger
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=ledger-{id}');
CREATE TABLE ledger_naive (id int PRIMARY KEY, v int, fence_token bigint);
CREATE TRIGGER ledger_fence BEFORE INSERT OR UPDATE ON ledger_naive
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token');
SELECT (rp_acquire('ledger-1', 60000)).fence AS fence \gset
BEGIN;
INSERT INTO ledger (id, v) VALUES (1, 1);
INSERT INTO ledger_naive VALUES (1, 1, :fence);
-- the lease is short only after the writes (a slow machine must not end it
-- before them): 300 ms left, then the commit comes after it
SELECT rp_extend(l, 300) IS NOT NULL AS shortened FROM rp_leases() l WHERE name = 'ledger-1';
SELECT pg_sleep(0.35);
COMMIT;
BEGIN;
INSERT INTO ledger_naive VALUES (2, 1, :fence);
SELECT pg_sleep(0.35);
COMMIT;
SELECT (SELECT count(*) FROM ledger) AS fenced_rows, (SELECT count(*) FROM ledger_naive) AS naive_rows;
SELECT rp_acquire('ledger-1', 10000) IS NOT NULL AS acquired;
BEGIN;
INSERT INTO ledger (id, v) VALUES (1, 1);
SELECT rp_release('ledger-1');
COMMIT;
SELECT rp_acquire('ledger-1', 10000) IS NOT NULL AS acquired;
INSERT INTO ledger (id, v) VALUES (1, 1);
SELECT id, v, fence_token > 0 AS stamped FROM ledger;
-- The commit-time check refuses a commit later than (deadline -
-- lease_margin), though the lease still lives in Redis.  No clock decides
-- it: the write is made with a 50 ms margin under a 60 s lease, then the
-- margin is raised above what is left (and the deadline plus the margin,
-- what a check with the sign turned would accept, is far ahead).
SELECT rp_extend(l, 60000) IS NOT NULL AS extended FROM rp_leases() l WHERE name = 'ledger-1';
BEGIN;
UPDATE ledger SET v = 2 WHERE id = 1;
SET LOCAL redis_primitives.lease_margin = 90000;
COMMIT;
SELECT v FROM ledger WHERE id = 1;
-- and with the margin inside what is left, the same commit goes through
BEGIN;
UPDATE ledger SET v = 3 WHERE id = 1;
SET LOCAL redis_primitives.lease_margin = 30000;
COMMIT;
SELECT v FROM ledger WHERE id = 1;
SELECT rp_release_all();
RESET redis_primitives.lease_margin;

-- A write made and rolled back in a subtransaction does not hold up the
-- commit: its lease (an xact lease of that subtransaction) went with it.
SET redis_primitives.lease_margin = 50;
BEGIN;
SAVEPOINT s;
SELECT rp_acquire_xact('ledger-2', 10000) IS NOT NULL AS acquired;
INSERT INTO ledger (id, v) VALUES (2, 2);
ROLLBACK TO SAVEPOINT s;
COMMIT;
-- a PREPARE after a lease-bound write is refused (COMMIT PREPARED has no deadline)
SELECT rp_acquire('ledger-3', 10000) IS NOT NULL AS acquired;
BEGIN;
INSERT INTO ledger (id, v) VALUES (3, 3);
PREPARE TRANSACTION 'fenced';
SELECT id FROM ledger ORDER BY id;
SELECT rp_release_all();
RESET redis_primitives.lease_margin;
