-- title: rp_semaphore_acquire + rp_release, each client its own semaphore of 4
-- clients: 1 8
-- baseline: lock_pair
-- redis-calls: 2
-- floor: sem_acquire,sem_release
SELECT fence FROM rp_semaphore_acquire('bench-sem-' || :client_id, 4, 10000);
SELECT rp_release('bench-sem-' || :client_id);
