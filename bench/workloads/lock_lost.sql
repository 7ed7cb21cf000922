-- title: rp_release of a lease that is gone (false)
-- clients: 1
-- baseline: select1
-- redis-calls: 1
-- floor: lock_release
SELECT rp_release(ROW('bench-gone-' || :client_id, '${TOKEN}', 1, now())::rp_lease);
