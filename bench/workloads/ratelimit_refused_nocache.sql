-- title: rp_ratelimit refused, refusal cache off (what 1.0 paid)
-- clients: 1 8
-- baseline: select1
-- env: PGOPTIONS=-c redis_primitives.ratelimit_cache=off
-- setup: SELECT rp_ratelimit_reset('bench-flood-off')
-- setup: SELECT rp_ratelimit('bench-flood-off', 1, 3600000, 1, 'gcra')
SELECT rp_ratelimit('bench-flood-off', 1, 3600000, 1, 'gcra');
