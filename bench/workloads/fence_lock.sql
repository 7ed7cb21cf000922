-- title: row UPDATE of a random row of 1,000, rp_fence_guard('fence_token', 'lock=bench-{grp}'), the writer holds the lease
-- clients: 1
-- baseline: fence_none
-- define: held=0
-- setup: \i fixtures/fence.sql
\set id random(1, 1000)
\if :held = 0
SELECT (rp_acquire('bench-1', 3600000) IS NOT NULL)::int AS held \gset
\endif
UPDATE bench_fence_lock SET balance = balance + 1 WHERE id = :id;
