-- title: rp_acquire_all of ten names, then rp_release_all (target: <= 1.3x acquire1)
-- clients: 1 4 16
-- baseline: acquire1
-- redis-calls: 2
SELECT rp_acquire_all(ARRAY['bench-a0-' || :client_id, 'bench-a1-' || :client_id,
       'bench-a2-' || :client_id, 'bench-a3-' || :client_id, 'bench-a4-' || :client_id,
       'bench-a5-' || :client_id, 'bench-a6-' || :client_id, 'bench-a7-' || :client_id,
       'bench-a8-' || :client_id, 'bench-a9-' || :client_id], 10000) IS NOT NULL;
SELECT rp_release_all();
