-- title: a new connection per call over TLS (verify-full) (a changed setting drops it) then rp_ping: minus the ping workload, the cost of connecting
-- clients: 1
-- baseline: tls_plain_reconnect
-- requires: tls
-- env: redis_primitives.port=${TLS_PORT}
-- env: redis_primitives.tls=verify-full
-- env: redis_primitives.tls_ca_file=${TLS_DIR}/ca.crt
SELECT set_config('redis_primitives.database', '0', false);
SELECT rtt_ms FROM rp_ping();
