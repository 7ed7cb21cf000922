-- title: rp_extend of a held lease (by lease value)
-- clients: 1
-- baseline: select1
-- redis-calls: 1
-- floor: lock_extend
-- redis-setup: SET rp:{bench-ext}:lock ${TOKEN} PX 3600000
SELECT fence FROM rp_extend(ROW('bench-ext', '${TOKEN}', 1, now())::rp_lease, 600000);
