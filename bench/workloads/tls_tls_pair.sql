-- title: rp_acquire + rp_release over TLS (verify-full), connection established
-- clients: 1
-- baseline: tls_plain_pair
-- requires: tls
-- redis-calls: 2
-- env: redis_primitives.port=${TLS_PORT}
-- env: redis_primitives.tls=verify-full
-- env: redis_primitives.tls_ca_file=${TLS_DIR}/ca.crt
SELECT fence FROM rp_acquire('bench-tls-' || :client_id, 10000);
SELECT rp_release('bench-tls-' || :client_id);
