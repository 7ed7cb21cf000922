-- title: rp_release(rp_acquire(...)) with redis_primitives.track = on (compare cpu_us_per_txn)
-- clients: 1 8
-- baseline: track_pair_off
-- redis-calls: 2
-- env: redis_primitives.track=on
SELECT rp_release(rp_acquire('bench-track-' || :client_id, 10000));
