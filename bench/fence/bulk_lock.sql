-- bench/fence/bulk_lock.sql: every row of 1,000 in one UPDATE: the per-row trigger cost dominates.
SELECT count(*) AS held FROM rp_leases() \gset
\if :held = 0
SELECT rp_acquire('bench-1', 3600000) IS NOT NULL AS got;
\endif
UPDATE t_lock SET balance = balance + 1;
