-- title: UPDATE of all 1,000 rows, no trigger (difference to no trigger in ms = µs per row)
-- clients: 1
-- redis-calls: 0
-- setup: \i fixtures/fence.sql
UPDATE bench_fence_none SET balance = balance + 1, fence_token = fence_token;
