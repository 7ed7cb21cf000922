-- title: rp_acquire + rp_release, each client its own name (2 statements)
-- clients: 1 4 16
-- baseline: select1
-- redis-calls: 2
-- floor: lock_acquire,lock_release
SELECT fence FROM rp_acquire('bench-' || :client_id, 10000);
SELECT rp_release('bench-' || :client_id);
