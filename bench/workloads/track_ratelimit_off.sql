-- title: rp_ratelimit sliding_log, never refused, with redis_primitives.track = off (compare cpu_us_per_txn)
-- clients: 1 8
-- redis-calls: 1
-- env: redis_primitives.track=off
SELECT rp_ratelimit('bench-track-rl-' || :client_id, 100000, 1000);
