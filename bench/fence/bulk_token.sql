-- bench/fence/bulk_token.sql: every row of 1,000 in one UPDATE: the per-row trigger cost dominates.
UPDATE t_token SET balance = balance + 1, fence_token = fence_token;
