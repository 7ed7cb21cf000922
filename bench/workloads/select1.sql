-- title: SELECT 1 (the floor of every SQL call)
-- clients: 1 8
SELECT 1;
