-- title: rp_release(rp_acquire(...)) with redis_primitives.track = off (compare cpu_us_per_txn)
-- clients: 1 8
-- redis-calls: 2
-- env: redis_primitives.track=off
SELECT rp_release(rp_acquire('bench-track-' || :client_id, 10000));
