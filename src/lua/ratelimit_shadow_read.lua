#!lua flags=no-writes
-- ratelimit_shadow_read.lua: how many requests a limit in shadow mode
-- refused (and its callers admitted anyway).
--
-- KEYS[1]  <prefix>{key}:rl:shadow
--
-- Returns the count, 0 when there is none.
return tonumber(redis.call('GET', KEYS[1]) or '0')
