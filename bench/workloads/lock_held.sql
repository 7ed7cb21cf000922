-- title: rp_acquire of a lock someone else holds (NULL)
-- clients: 1
-- baseline: select1
-- redis-calls: 1
-- floor: lock_acquire_held
-- redis-setup: SET rp:{bench-held}:lock othertokenothertokenothertoken00 PX 3600000
-- redis-setup: SET rp:{bench-held}:fence 41
SELECT fence FROM rp_acquire('bench-held', 10000);
