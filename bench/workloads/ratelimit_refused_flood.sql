-- title: rp_ratelimit refused, answered by the refusal cache (target: <= 1.1x SELECT 1, 0 round trips)
-- clients: 1 4 16
-- baseline: select1
-- requires: preload
-- redis-calls: 0
-- setup: SELECT rp_ratelimit_reset('bench-flood')
-- setup: SELECT rp_ratelimit('bench-flood', 1, 3600000, 1, 'gcra')
-- setup: SELECT rp_ratelimit('bench-flood', 1, 3600000, 1, 'gcra')
SELECT rp_ratelimit('bench-flood', 1, 3600000, 1, 'gcra');
