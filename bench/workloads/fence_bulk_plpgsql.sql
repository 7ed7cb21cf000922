-- title: UPDATE of all 1,000 rows, the token rule written by hand in PL/pgSQL (difference to no trigger in ms = µs per row)
-- clients: 1
-- baseline: fence_bulk_none
-- setup: \i fixtures/fence.sql
UPDATE bench_fence_plpgsql SET balance = balance + 1, fence_token = fence_token;
