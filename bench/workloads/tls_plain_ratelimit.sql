-- title: rp_ratelimit gcra over plain TCP, connection established
-- clients: 1
-- requires: tls
-- redis-calls: 1
-- env: redis_primitives.port=${TLS_PLAIN_PORT}
SELECT rp_ratelimit('bench-tls-rl', 1000000000, 60000, 1, 'gcra');
