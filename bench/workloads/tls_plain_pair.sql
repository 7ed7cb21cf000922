-- title: rp_acquire + rp_release over plain TCP, connection established
-- clients: 1
-- requires: tls
-- redis-calls: 2
-- env: redis_primitives.port=${TLS_PLAIN_PORT}
SELECT fence FROM rp_acquire('bench-tls-' || :client_id, 10000);
SELECT rp_release('bench-tls-' || :client_id);
