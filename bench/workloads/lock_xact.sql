-- title: rp_acquire_xact in BEGIN .. COMMIT (released at commit)
-- clients: 1
-- baseline: select1
-- redis-calls: 2
-- floor: lock_acquire,lock_release
BEGIN;
SELECT fence FROM rp_acquire_xact('bench-x-' || :client_id, 10000);
COMMIT;
