#!lua flags=allow-oom
-- ratelimit_reset.lua: forget every algorithm's state of one rate-limit key.
--
-- KEYS[1..n]  <prefix>{key}:rl:<algorithm> for every algorithm; they share
--             the hash tag, so one call works on Redis Cluster too
--
-- Returns how many of the keys existed.
return redis.call('DEL', unpack(KEYS))
