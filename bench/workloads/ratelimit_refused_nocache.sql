-- title: rp_ratelimit refused with the refusal cache off (one round trip each, as in 1.0)
-- clients: 1 4 16
-- baseline: select1
-- redis-calls: 1
-- floor: rl_gcra
-- env: redis_primitives.ratelimit_cache=off
-- setup: SELECT rp_ratelimit_reset('bench-flood-off')
-- setup: SELECT rp_ratelimit('bench-flood-off', 1, 3600000, 1, 'gcra')
SELECT rp_ratelimit('bench-flood-off', 1, 3600000, 1, 'gcra');
