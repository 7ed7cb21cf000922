-- title: a new connection per call over plain TCP (a changed setting drops it) then rp_ping: minus the ping workload, the cost of connecting
-- clients: 1
-- requires: tls
-- env: redis_primitives.port=${TLS_PLAIN_PORT}
SELECT set_config('redis_primitives.database', '0', false);
SELECT rtt_ms FROM rp_ping();
