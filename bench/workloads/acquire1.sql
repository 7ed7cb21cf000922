-- title: rp_acquire of one name, then rp_release_all
-- clients: 1 8
SELECT rp_acquire('bench-one-' || :client_id, 10000) IS NOT NULL;
SELECT rp_release_all();
