-- title: row UPDATE of a random row of 1,000, the token rule written by hand in PL/pgSQL
-- clients: 1
-- baseline: fence_none
-- setup: \i fixtures/fence.sql
\set id random(1, 1000)
UPDATE bench_fence_plpgsql SET balance = balance + 1, fence_token = 7 WHERE id = :id;
