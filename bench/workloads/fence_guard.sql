-- title: row UPDATE of a random row of 1,000, rp_fence_guard('fence_token') (1.0's token guard)
-- clients: 1
-- baseline: fence_none
-- setup: \i fixtures/fence.sql
\set id random(1, 1000)
UPDATE bench_fence_guard SET balance = balance + 1, fence_token = 7 WHERE id = :id;
