-- title: rp_ping over plain TCP, connection established
-- clients: 1
-- requires: tls
-- redis-calls: 1
-- env: redis_primitives.port=${TLS_PLAIN_PORT}
SELECT rtt_ms FROM rp_ping();
