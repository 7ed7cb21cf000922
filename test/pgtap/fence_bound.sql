-- Fencing a writer cannot forget (docs/lock.md, "Which guard to use").  Each
-- hole that 1.0's token guard leaves open is shown twice: passing through the
-- naive 1.0-style guard (rp_fence_guard('fence_token'), the writer hands over
-- the token), then refused by the guard that is bound to the lease itself
-- (rp_fence_guard('fence_token', 'lock=acct-{id}')) or by 'strict'.
--
-- "A newer holder wrote the row" is staged with the guard switched off
-- (session_replication_role = replica): in production that holder is another
-- session or server; test/isolation/specs/fence_bound_race.spec races real
-- sessions.
BEGIN;
SELECT plan(61);

SET LOCAL redis_primitives.lease_margin = 50;

-- The naive twin: 1.0's token guard.
CREATE TABLE naive (id int PRIMARY KEY, balance int NOT NULL, fence_token bigint);
CREATE TRIGGER naive_fence BEFORE INSERT OR UPDATE ON naive
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token');
-- The lock-bound guard: the writer passes no token at all.
CREATE TABLE acct (id int PRIMARY KEY, balance int NOT NULL, fence_token bigint);
CREATE TRIGGER acct_fence BEFORE INSERT OR UPDATE OR DELETE ON acct
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=acct-{id}');
-- 'strict': writers carry tokens, and must always carry them.
CREATE TABLE strict_acct (id int PRIMARY KEY, balance int NOT NULL, fence_token bigint);
CREATE TRIGGER strict_fence BEFORE INSERT OR UPDATE ON strict_acct
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'strict');

SELECT is_empty($$SELECT * FROM rp_fence_check('acct')$$, 'rp_fence_check: the lock-bound guard can work');
SELECT is_empty($$SELECT * FROM rp_fence_check('strict_acct')$$, 'rp_fence_check: the strict guard can work');

-- Stage "a newer holder wrote token 10" without any guard.
CREATE FUNCTION pg_temp.stage(tbl regclass, bal int, tok bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  SET LOCAL session_replication_role = replica;
  EXECUTE format('DELETE FROM %s WHERE id = 1', tbl);
  EXECUTE format('INSERT INTO %s VALUES (1, %s, %s)', tbl, bal, tok);
  SET LOCAL session_replication_role = origin;
END $$;

-- Hole 1: an UPDATE that does not set the token column carries the stored
-- token, "equal", and passes.
SELECT pg_temp.stage('naive', 100, 10);
SELECT lives_ok($$UPDATE naive SET balance = 1 WHERE id = 1$$,
  'naive: an UPDATE that forgets the token passes');
SELECT pg_temp.stage('acct', 100, 10);
SELECT throws_ok($$UPDATE acct SET balance = 1 WHERE id = 1$$, 'RP004', NULL,
  'lock-bound: an UPDATE without a lease is refused (RP004)');
SELECT pg_temp.stage('strict_acct', 100, 10);
SELECT throws_ok($$UPDATE strict_acct SET balance = 1 WHERE id = 1$$, 'RP004',
  'an UPDATE of table "strict_acct" must set the fence token column "fence_token"',
  'strict: an UPDATE that does not assign the token is refused (RP004)');
SELECT lives_ok($$UPDATE strict_acct SET balance = 2, fence_token = 11 WHERE id = 1$$,
  'strict: an UPDATE that assigns a current token passes');

-- Hole 2: an upsert whose UPDATE does not assign the token, over a row
-- holding 10, with the stale token 5 in VALUES.
SELECT pg_temp.stage('naive', 100, 10);
SELECT lives_ok($$INSERT INTO naive VALUES (1, 5, 5)
  ON CONFLICT (id) DO UPDATE SET balance = EXCLUDED.balance$$,
  'naive: the stale upsert passes');
SELECT is((SELECT balance FROM naive WHERE id = 1), 5, 'naive: and overwrote the newer holder''s balance');
SELECT pg_temp.stage('strict_acct', 100, 10);
SELECT throws_ok($$INSERT INTO strict_acct VALUES (1, 5, 5)
  ON CONFLICT (id) DO UPDATE SET balance = EXCLUDED.balance$$, 'RP004', NULL,
  'strict: the upsert''s UPDATE that does not assign the token is refused');
SELECT throws_ok($$INSERT INTO strict_acct VALUES (1, 5, 5)
  ON CONFLICT (id) DO UPDATE SET balance = EXCLUDED.balance, fence_token = EXCLUDED.fence_token$$,
  'RP001', NULL, 'strict: the upsert that assigns its stale token is refused (RP001)');
-- Lock-bound: the stale holder has a live lease whose fence (from the
-- counter) is below the 10 the newer holder left on the row.
SELECT rp_test.redis('SET', rp_test.key('acct-1', 'fence'), '4');
SELECT is((rp_acquire('acct-1', 10000)).fence, 5::bigint, 'the stale holder''s lease has fence 5');
SELECT pg_temp.stage('acct', 100, 10);
SELECT throws_ok($$INSERT INTO acct VALUES (1, 5, 5)
  ON CONFLICT (id) DO UPDATE SET balance = EXCLUDED.balance$$, 'RP001', NULL,
  'lock-bound: the stale upsert is refused (RP001)');
SELECT is((SELECT balance FROM acct WHERE id = 1), 100, 'lock-bound: the newer holder''s balance survives');

-- Hole 3: a stale holder DELETEs the newer holder's row and re-INSERTs it
-- with its old token.
SELECT pg_temp.stage('naive', 100, 10);
SELECT lives_ok($$DELETE FROM naive WHERE id = 1$$, 'naive: the stale DELETE passes (a DELETE is never compared)');
SELECT lives_ok($$INSERT INTO naive VALUES (1, 5, 5)$$, 'naive: and the re-INSERT with token 5 passes');
SELECT throws_ok($$DELETE FROM acct WHERE id = 1$$, 'RP001', NULL,
  'lock-bound: the stale DELETE is refused (RP001)');
SELECT throws_ok($$MERGE INTO acct a USING (VALUES (1)) v(id) ON a.id = v.id WHEN MATCHED THEN DELETE$$,
  'RP001', NULL, 'lock-bound: MERGE ... WHEN MATCHED THEN DELETE too');
SELECT rp_release('acct-1');
SELECT throws_ok($$DELETE FROM acct WHERE id = 1$$, 'RP004', NULL,
  'lock-bound: a DELETE without a lease is refused (RP004)');
SELECT throws_ok($$INSERT INTO acct VALUES (2, 5, 5)$$, 'RP004', NULL,
  'lock-bound: an INSERT without a lease is refused (RP004)');

-- Hole 4: a token typed by hand.
SELECT pg_temp.stage('naive', 100, 10);
SELECT lives_ok($$UPDATE naive SET fence_token = 9223372036854775807 WHERE id = 1$$,
  'naive: a hand-typed maximal token is accepted');
SELECT is(rp_fence_floor('naive'), 9223372036854775807, 'naive: rp_fence_floor now yields the maximum');
SELECT throws_ok($$SELECT rp_acquire('acct-1', 1000, 0, rp_fence_floor('naive'))$$, '22023', NULL,
  'naive: which rp_acquire refuses as a floor: every future holder is locked out');
SELECT is((rp_acquire('acct-1', 10000)).fence, 6::bigint, 'a live lease with fence 6');
SELECT pg_temp.stage('acct', 100, 3);
SELECT lives_ok($$UPDATE acct SET balance = 7, fence_token = 9223372036854775807 WHERE id = 1$$,
  'lock-bound: the write goes through');
SELECT is((SELECT fence_token FROM acct WHERE id = 1), 6::bigint,
  'lock-bound: but the column holds the lease''s fence, not the typed token');
SELECT lives_ok($$DELETE FROM acct WHERE id = 1; INSERT INTO acct (id, balance) VALUES (1, 7)$$,
  'lock-bound: the holder deletes and re-inserts, passing no token at all');
SELECT is((SELECT fence_token FROM acct WHERE id = 1), 6::bigint, 'lock-bound: the new row is stamped with the fence');
SELECT throws_ok($$UPDATE acct SET id = 4 WHERE id = 1$$, 'RP004', 'no lease on "acct-4" for a write to table "acct"',
  'an UPDATE that changes the lock name needs the lease of the new name too');
SELECT lives_ok($$SELECT rp_acquire('acct-4', 10000)$$, 'with both leases');
SELECT lives_ok($$UPDATE acct SET id = 4 WHERE id = 1$$, 'the renaming UPDATE passes');
SELECT is((SELECT fence_token FROM acct WHERE id = 4), (SELECT fence FROM rp_leases() WHERE name = 'acct-4'),
  'and the row is stamped with the new name''s fence');
SELECT rp_release_all();

-- Hole 5: a holder writing after its own lease ran out, before anyone else
-- wrote (1.0's "honest limit").
SELECT pg_temp.stage('naive', 100, 6);
CREATE TEMP TABLE l AS SELECT rp_acquire('acct-1', 200) AS l;
SELECT pg_temp.stage('acct', 100, 0);
SELECT pg_sleep(0.25);
SELECT lives_ok(format('UPDATE naive SET balance = 70, fence_token = %s WHERE id = 1', (SELECT (l).fence FROM l)),
  'naive: a write after the lease ran out is accepted when nobody wrote since');
SELECT throws_ok($$UPDATE acct SET balance = 70 WHERE id = 1$$, 'RP004',
  'lease on "acct-1" has expired for a write to table "acct"',
  'lock-bound: refused, though nobody else has written');
-- lease_margin: a lease that has less than the margin left is not live.
-- (A 10 s lease, so that a loaded machine cannot run it out between the
-- acquire and the write that must be accepted.)
SELECT lives_ok($$SELECT rp_acquire('acct-1', 10000)$$, 'a fresh 10 s lease');
SET LOCAL redis_primitives.lease_margin = 20000;
-- Said apart from an expired lease: a TTL at or below the margin refuses
-- every write, and "another holder may have the lock" would mislead.
SELECT throws_ok($$UPDATE acct SET balance = 71 WHERE id = 1$$, 'RP004',
  'lease on "acct-1" is too close to its end for a write to table "acct"',
  'lock-bound: a lease with less than lease_margin left is not live');
SELECT ok(detail LIKE '%within redis_primitives.lease_margin (20000 ms) of now.'
          AND hint LIKE 'Extend it with rp_extend before writing, or take it with a TTL well above redis_primitives.lease_margin%',
  'the refusal names the margin and says to extend or take a longer TTL: ' || coalesce(detail, '(none)') || ' / ' || coalesce(hint, '(none)'))
  FROM rp_test.refusal($$UPDATE acct SET balance = 71 WHERE id = 1$$);
SET LOCAL redis_primitives.lease_margin = 50;
SELECT lives_ok($$UPDATE acct SET balance = 71 WHERE id = 1$$, 'and within the margin it is');
SELECT rp_release_all();

-- 'skip' combines with the lock: a stale change is dropped, row count 0.
CREATE TABLE doc (id int PRIMARY KEY, body text, fence int);
CREATE TRIGGER doc_fence BEFORE INSERT OR UPDATE OR DELETE ON doc
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence', 'skip', 'lock=doc:{id}');
SET LOCAL session_replication_role = replica;
INSERT INTO doc VALUES (1, 'newer', 1000);
SET LOCAL session_replication_role = origin;
SELECT lives_ok($$SELECT rp_acquire('doc:1', 10000)$$, 'a lease on doc:1 (fence below 1000)');
CREATE FUNCTION pg_temp.nrows(q text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint; BEGIN EXECUTE q; GET DIAGNOSTICS n = ROW_COUNT; RETURN n; END $$;
SELECT is(pg_temp.nrows($$UPDATE doc SET body = 'stale'$$), 0::bigint,
  'skip + lock: the stale UPDATE changes no row');
SELECT is(pg_temp.nrows($$DELETE FROM doc$$), 0::bigint,
  'skip + lock: the stale DELETE deletes no row');
SELECT rp_release_all();

-- The row as written: a BEFORE trigger that sorts after the guard could
-- lower the token behind it.  The naive twin is a plpgsql copy of 1.0's
-- comparison, followed by such a trigger.
CREATE FUNCTION pg_temp.naive_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND NEW.fence_token < OLD.fence_token THEN
    RAISE EXCEPTION 'stale' USING ERRCODE = 'RP001';
  END IF;
  RETURN NEW;
END $$;
CREATE FUNCTION pg_temp.lower_token() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.fence_token := 0; RETURN NEW; END $$;
CREATE TABLE naive2 (id int PRIMARY KEY, balance int NOT NULL, fence_token bigint);
CREATE TRIGGER naive2_fence BEFORE INSERT OR UPDATE ON naive2 FOR EACH ROW EXECUTE FUNCTION pg_temp.naive_guard();
CREATE TRIGGER zz_lower BEFORE UPDATE ON naive2 FOR EACH ROW EXECUTE FUNCTION pg_temp.lower_token();
INSERT INTO naive2 VALUES (1, 100, 10);
SELECT lives_ok($$UPDATE naive2 SET balance = 1, fence_token = 10 WHERE id = 1$$,
  'naive: a later BEFORE trigger''s change passes the guard');
SELECT is((SELECT fence_token FROM naive2), 0::bigint, 'naive: the row now holds token 0: the next stale holder gets in');
CREATE TRIGGER zz_lower BEFORE UPDATE ON naive FOR EACH ROW EXECUTE FUNCTION pg_temp.lower_token();
SELECT pg_temp.stage('naive', 100, 10);
SELECT throws_ok($$UPDATE naive SET balance = 1, fence_token = 10 WHERE id = 1$$, '39P01', NULL,
  'a guard with a later BEFORE trigger refuses to run');
SELECT is((SELECT count(*) FROM rp_fence_check('naive') WHERE problem LIKE '%"zz_lower" fires after the guard%'), 1::bigint,
  'rp_fence_check names the trigger that fires after the guard');
ALTER TRIGGER zz_lower ON naive RENAME TO a_lower;
SELECT throws_ok($$UPDATE naive SET balance = 1, fence_token = 10 WHERE id = 1$$, 'RP001', NULL,
  'renamed to fire before the guard, the guard sees the lowered token and refuses it');
DROP TRIGGER a_lower ON naive;

-- Domains over integer types are accepted, and their checks apply to the stamp.
CREATE DOMAIN fence_t AS bigint CHECK (VALUE > 0);
CREATE TABLE dom (id int PRIMARY KEY, f fence_t);
CREATE TRIGGER dom_fence BEFORE INSERT OR UPDATE OR DELETE ON dom
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('f', 'lock=dom');
SELECT lives_ok($$SELECT rp_acquire('dom', 10000)$$, 'a lease on dom');
SELECT lives_ok($$INSERT INTO dom (id) VALUES (1)$$, 'a domain over bigint is a token column');
SELECT is((SELECT f FROM dom)::bigint, (SELECT fence FROM rp_leases() WHERE name = 'dom'), 'stamped with the lease''s fence');
SELECT rp_release_all();

-- rp_fence_floor reads the column from the trigger's arguments as written.
CREATE TABLE odd ("jeton_clôture" bigint, "a\b" int);
CREATE TRIGGER odd1 BEFORE INSERT OR UPDATE ON odd FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('jeton_clôture');
CREATE TRIGGER odd2 BEFORE INSERT OR UPDATE ON odd FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('a\b');
INSERT INTO odd VALUES (41, 42);
SELECT throws_ok(format('SELECT max(%I) FROM odd',
                        (SELECT split_part(encode(tgargs, 'escape'), '\000', 1) FROM pg_trigger WHERE tgname = 'odd1')),
  '42703', NULL, 'naive: 1.0''s decoding of tgargs mangles "jeton_clôture" (42703)');
SELECT is(rp_fence_floor('odd'), 42::bigint, 'rp_fence_floor reads both columns, accents and backslash included');
CREATE TABLE notok (t text, i int);
CREATE TRIGGER bad0 BEFORE INSERT OR UPDATE ON notok FOR EACH ROW EXECUTE FUNCTION rp_fence_guard();
SELECT throws_ok($$SELECT rp_fence_floor('notok')$$, '39P01', NULL, 'rp_fence_floor: a guard with no argument is a clear error');
DROP TRIGGER bad0 ON notok;
CREATE TRIGGER bad1 BEFORE INSERT OR UPDATE ON notok FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('t');
SELECT throws_ok($$SELECT rp_fence_floor('notok')$$, '42804', NULL, 'rp_fence_floor: a text column is a clear error');

-- Guards that cannot work are refused when they fire, and rp_fence_check says why.
CREATE TABLE misuse (id int, f bigint, other int);
CREATE TRIGGER g1 BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('f');
SELECT throws_ok($$INSERT INTO misuse VALUES (1, 1)$$, '39P01', 'rp_fence_guard: must be fired on INSERT OR UPDATE',
  'BEFORE INSERT only: refused');
DROP TRIGGER g1 ON misuse;
CREATE TRIGGER g2 BEFORE INSERT OR UPDATE OF other ON misuse FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('f');
SELECT throws_ok($$INSERT INTO misuse VALUES (1, 1)$$, '39P01',
  'rp_fence_guard: must fire on every UPDATE, not UPDATE OF a column list', 'UPDATE OF other_col: refused');
SELECT results_eq($$SELECT trigger_name, problem FROM rp_fence_check('misuse')$$,
  $$VALUES ('g2', 'must fire on every UPDATE, not UPDATE OF a column list')$$,
  'rp_fence_check reports it');
DROP TRIGGER g2 ON misuse;
SELECT results_eq($$SELECT trigger_name, problem FROM rp_fence_check('misuse')$$,
  $$VALUES (NULL::text, 'has no rp_fence_guard trigger')$$, 'rp_fence_check: a table with no guard');

-- Two guards on one token column.  Each compares the column with the fences
-- of its own lease and stamps them, so the one that fires last overwrites
-- what the other checks: the row holds the table lease's fence, and a stale
-- holder of the row's lease, whose fence is above that, gets in.  Staged:
-- the newer holder's write left the table lease's fence 1 in the row.
CREATE TABLE two (id int PRIMARY KEY, balance int NOT NULL, fence_token bigint);
CREATE TRIGGER two_row BEFORE INSERT OR UPDATE OR DELETE ON two
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=two-{id}');
CREATE TRIGGER two_table BEFORE INSERT OR UPDATE OR DELETE ON two
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=two-table');
SELECT pg_temp.stage('two', 200, 1);
SELECT rp_acquire('two-1', 10000), rp_acquire('two-table', 10000);
SELECT throws_ok($$UPDATE two SET balance = 50 WHERE id = 1$$, '39P01', NULL,
  'two guards on one token column: the write is refused, not let through by the other lease''s fence');
SELECT is((SELECT balance FROM two), 200, 'the row is unchanged');
SELECT results_eq($$SELECT trigger_name, problem LIKE '%same token column "fence_token"%' FROM rp_fence_check('two') ORDER BY 1$$,
  $$VALUES ('two_row'::text, true), ('two_table', true)$$, 'rp_fence_check reports both guards');
DROP TRIGGER two_table ON two;
SELECT lives_ok($$UPDATE two SET balance = 50 WHERE id = 1$$, 'one guard left: the holder of two-1 writes');
-- The same through a partition: the parent's guard, cloned, and the
-- partition's own on the same column.
CREATE TABLE twop (id int, fence_token bigint) PARTITION BY RANGE (id);
CREATE TABLE twop1 PARTITION OF twop FOR VALUES FROM (0) TO (100);
CREATE TRIGGER twop_row BEFORE INSERT OR UPDATE OR DELETE ON twop
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=twop-{id}');
CREATE TRIGGER twop1_all BEFORE INSERT OR UPDATE OR DELETE ON twop1
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=twop-all');
SELECT results_eq($$SELECT relation::text, trigger_name FROM rp_fence_check('twop')
                    WHERE problem LIKE '%same token column%' ORDER BY 2$$,
  $$VALUES ('twop1'::text, 'twop1_all'::text), ('twop1', 'twop_row')$$,
  'a partition''s own guard on the parent guard''s column: both reported on the partition');
SELECT rp_release_all();

SELECT * FROM finish();
ROLLBACK;
