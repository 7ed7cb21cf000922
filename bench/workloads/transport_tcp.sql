-- title: rp_acquire + rp_release against a second Redis over loopback TCP
-- clients: 1
-- baseline: lock_pair
-- redis-calls: 2
-- env: redis_primitives.port=${REDIS2_PORT}
SELECT fence FROM rp_acquire('bench-' || :client_id, 10000);
SELECT rp_release('bench-' || :client_id);
