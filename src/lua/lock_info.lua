#!lua flags=no-writes
-- lock_info.lua: what Redis holds for one lock name, without the token.
--
-- KEYS[1]  <prefix>{name}:lock
-- KEYS[2]  <prefix>{name}:fence
--
-- Returns {held (0|1), pttl (-2 when absent), last fence or false}.
-- While a lease is held no other acquire can touch the counter, so the
-- holder's fence is the counter's value.
local pttl = redis.call('PTTL', KEYS[1])
local held = 0
if pttl ~= -2 then held = 1 end
local fence = redis.call('GET', KEYS[2])
if not fence then fence = false end
return {held, pttl, fence}
