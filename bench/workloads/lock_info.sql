-- title: rp_lock_info of a lock someone else holds
-- clients: 1
-- baseline: select1
-- redis-calls: 1
-- floor: lock_info
-- redis-setup: SET rp:{bench-held}:lock othertokenothertokenothertoken00 PX 3600000
-- redis-setup: SET rp:{bench-held}:fence 41
SELECT held FROM rp_lock_info('bench-held');
