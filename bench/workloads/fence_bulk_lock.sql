-- title: UPDATE of all 1,000 rows, rp_fence_guard('fence_token', 'lock=bench-{grp}'), the writer holds the lease (difference to no trigger in ms = µs per row)
-- clients: 1
-- baseline: fence_bulk_none
-- define: held=0
-- setup: \i fixtures/fence.sql
\if :held = 0
SELECT (rp_acquire('bench-1', 3600000) IS NOT NULL)::int AS held \gset
\endif
UPDATE bench_fence_lock SET balance = balance + 1;
