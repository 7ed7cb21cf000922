-- title: rp_ratelimit gcra over TLS (verify-full), connection established
-- clients: 1
-- baseline: tls_plain_ratelimit
-- requires: tls
-- redis-calls: 1
-- env: redis_primitives.port=${TLS_PORT}
-- env: redis_primitives.tls=verify-full
-- env: redis_primitives.tls_ca_file=${TLS_DIR}/ca.crt
SELECT rp_ratelimit('bench-tls-rl', 1000000000, 60000, 1, 'gcra');
