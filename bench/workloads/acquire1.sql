-- title: rp_acquire of one name, then rp_release_all (the baseline of acquire_all10)
-- clients: 1 4 16
-- redis-calls: 2
-- floor: lock_acquire,lock_release
SELECT rp_acquire('bench-one-' || :client_id, 10000) IS NOT NULL;
SELECT rp_release_all();
