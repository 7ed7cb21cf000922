-- bench/fence/bulk_strict.sql: every row of 1,000 in one UPDATE: the per-row trigger cost dominates.
UPDATE t_strict SET balance = balance + 1, fence_token = fence_token;
