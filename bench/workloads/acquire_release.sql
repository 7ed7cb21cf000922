-- title: rp_acquire + rp_release by name (two statements, two round trips)
-- clients: 1
-- baseline: select1
SELECT rp_acquire('bench-pair-' || :client_id, 10000) IS NOT NULL;
SELECT rp_release('bench-pair-' || :client_id);
