-- title: rp_ratelimit gcra, admitted (limit 100,000 per second)
-- clients: 1 4 16
-- baseline: select1
-- redis-calls: 1
-- floor: rl_gcra
SELECT rp_ratelimit('bench-' || :client_id, 100000, 1000, 1, 'gcra');
