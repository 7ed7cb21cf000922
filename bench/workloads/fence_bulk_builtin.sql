-- title: UPDATE of all 1,000 rows, PostgreSQL's own C row trigger (suppress_redundant_updates_trigger) (difference to no trigger in ms = µs per row)
-- clients: 1
-- baseline: fence_bulk_none
-- setup: \i fixtures/fence.sql
UPDATE bench_fence_builtin SET balance = balance + 1, fence_token = fence_token;
