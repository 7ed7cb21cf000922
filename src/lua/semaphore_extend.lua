#!lua flags=allow-oom
-- semaphore_extend.lua: compare-and-extend one permit.
--
-- KEYS[1]  <prefix>{name}:sem
-- ARGV[1]  the caller's token
-- ARGV[2]  new ttl in milliseconds, counted from now (Redis' TIME)
--
-- Returns 1 when the permit was still live and now lives ttl ms more, 0
-- otherwise (an expired permit is removed, never revived: its place may
-- already be someone else's).  The fence token does not change.
local function str(n) return string.format('%.0f', n) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not s then return 0 end
if tonumber(s) <= now then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', str(now + tonumber(ARGV[2])), ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], '-1', '-1', 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return 1
