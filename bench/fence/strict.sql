-- bench/fence/strict.sql: one row UPDATE per transaction, random row of 1,000.
\set id random(1, 1000)
UPDATE t_strict SET balance = balance + 1, fence_token = 7 WHERE id = :id;
