#!lua
-- ratelimit_shadow_count.lua: count one refusal of a limit in shadow mode,
-- for a request the limit can never admit (cost > max_requests), which the
-- algorithm's script only peeks at.
--
-- KEYS[1]  <prefix>{key}:rl:shadow  the count of refused requests
--
-- Returns the new count.
return redis.call('INCR', KEYS[1])
