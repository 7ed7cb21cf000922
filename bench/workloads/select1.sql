-- title: SELECT 1 (one PostgreSQL round trip: the floor of one statement)
-- clients: 1 4 16
-- redis-calls: 0
SELECT 1;
