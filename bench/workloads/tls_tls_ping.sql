-- title: rp_ping over TLS (verify-full), connection established
-- clients: 1
-- baseline: tls_plain_ping
-- requires: tls
-- redis-calls: 1
-- env: redis_primitives.port=${TLS_PORT}
-- env: redis_primitives.tls=verify-full
-- env: redis_primitives.tls_ca_file=${TLS_DIR}/ca.crt
SELECT rtt_ms FROM rp_ping();
