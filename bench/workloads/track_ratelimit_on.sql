-- title: rp_ratelimit sliding_log, never refused, with redis_primitives.track = on (compare cpu_us_per_txn)
-- clients: 1 8
-- baseline: track_ratelimit_off
-- redis-calls: 1
-- env: redis_primitives.track=on
SELECT rp_ratelimit('bench-track-rl-' || :client_id, 100000, 1000);
