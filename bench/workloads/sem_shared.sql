-- title: rp_semaphore_acquire + rp_release, every client on one semaphore of 4 (NULL answers count)
-- clients: 8
-- baseline: sem_pair
SELECT fence FROM rp_semaphore_acquire('bench-sem-shared', 4, 10000);
SELECT rp_release('bench-sem-shared');
