-- soak/sql/leader.sql -- the leader-bound table, on both PostgreSQL servers
-- (after soak/sql/common.sql).
-- Each server's workers add to it only while this server's background
-- elector believes it leads 'soak-leader'; the guard stamps the epoch.
SELECT soak_counter_table('t_leader', $$'fence_token', 'leader=soak-leader'$$);
