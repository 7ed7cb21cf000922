-- title: UPDATE of all 1,000 rows, rp_fence_guard('fence_token') (1.0's token guard) (difference to no trigger in ms = µs per row)
-- clients: 1
-- baseline: fence_bulk_none
-- setup: \i fixtures/fence.sql
UPDATE bench_fence_guard SET balance = balance + 1, fence_token = fence_token;
