-- title: rp_acquire + rp_release against the same second Redis over its unix socket
-- clients: 1
-- baseline: transport_tcp
-- redis-calls: 2
-- env: redis_primitives.unix_socket=${REDIS2_SOCKET}
SELECT fence FROM rp_acquire('bench-' || :client_id, 10000);
SELECT rp_release('bench-' || :client_id);
