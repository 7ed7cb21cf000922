-- title: pg_try_advisory_lock + pg_advisory_unlock (what a user would use instead: no fencing, one database)
-- clients: 1 4 16
-- baseline: lock_pair
-- redis-calls: 0
SELECT pg_try_advisory_lock(:client_id);
SELECT pg_advisory_unlock(:client_id);
