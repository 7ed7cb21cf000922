-- bench/fence/lock.sql: one row UPDATE per transaction, random row of 1,000.
-- The lease on bench-1 is taken on the first transaction and held after.
\set id random(1, 1000)
SELECT count(*) AS held FROM rp_leases() \gset
\if :held = 0
SELECT rp_acquire('bench-1', 3600000) IS NOT NULL AS got;
\endif
UPDATE t_lock SET balance = balance + 1 WHERE id = :id;
