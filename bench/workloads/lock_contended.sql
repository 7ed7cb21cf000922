-- title: rp_acquire + rp_release, every client on one name (round trips per transaction - 1 = share acquired)
-- clients: 4 16
-- baseline: lock_pair
SELECT fence FROM rp_acquire('bench-contended', 10000);
SELECT rp_release('bench-contended');
