-- title: rp_ratelimit gcra, admitted (one round trip)
-- clients: 1
-- baseline: select1
SELECT rp_ratelimit('bench-rl-' || :client_id, 100000, 1000, 1, 'gcra');
