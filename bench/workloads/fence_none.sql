-- title: row UPDATE of a random row of 1,000, no trigger
-- clients: 1
-- redis-calls: 0
-- setup: \i fixtures/fence.sql
\set id random(1, 1000)
UPDATE bench_fence_none SET balance = balance + 1, fence_token = 7 WHERE id = :id;
