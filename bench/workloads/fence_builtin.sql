-- title: row UPDATE of a random row of 1,000, PostgreSQL's own C row trigger (suppress_redundant_updates_trigger)
-- clients: 1
-- baseline: fence_none
-- setup: \i fixtures/fence.sql
\set id random(1, 1000)
UPDATE bench_fence_builtin SET balance = balance + 1, fence_token = 7 WHERE id = :id;
