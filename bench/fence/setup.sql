-- bench/fence/setup.sql: four 1,000-row tables, the same columns, differing
-- only in the guard (as bench/run.sh's section 4 for 1.0's guard).  grp is
-- the lock-bound guard's lock name column: one lease covers every row.
CREATE EXTENSION IF NOT EXISTS redis_primitives;
DROP TABLE IF EXISTS t_plain, t_token, t_strict, t_lock;
CREATE TABLE t_plain  (id int PRIMARY KEY, grp int NOT NULL, balance bigint NOT NULL,
                       fence_token bigint) WITH (fillfactor = 50);
CREATE TABLE t_token  (LIKE t_plain INCLUDING ALL) WITH (fillfactor = 50);
CREATE TABLE t_strict (LIKE t_plain INCLUDING ALL) WITH (fillfactor = 50);
CREATE TABLE t_lock   (LIKE t_plain INCLUDING ALL) WITH (fillfactor = 50);
CREATE TRIGGER zz_fence BEFORE INSERT OR UPDATE ON t_token
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token');
CREATE TRIGGER zz_fence BEFORE INSERT OR UPDATE ON t_strict
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'strict');
CREATE TRIGGER zz_fence BEFORE INSERT OR UPDATE OR DELETE ON t_lock
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=bench-{grp}');
INSERT INTO t_plain SELECT i, 1, 0, 0 FROM generate_series(1, 1000) i;
INSERT INTO t_token SELECT * FROM t_plain;
INSERT INTO t_strict SELECT * FROM t_plain;
SET session_replication_role = replica;
INSERT INTO t_lock SELECT * FROM t_plain;
