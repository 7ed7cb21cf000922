-- title: rp_is_leader(name) while the background elector leads (shared memory, no Redis)
-- clients: 1
-- baseline: select1
-- requires: preload
-- redis-calls: 0
SELECT rp_is_leader('${ELECTION}');
