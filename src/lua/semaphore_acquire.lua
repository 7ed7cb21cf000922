#!lua
-- semaphore_acquire.lua: take one permit of a counting semaphore, fairly.
--
-- KEYS[1]  <prefix>{name}:sem    sorted set of live permits: member = the
--          holder's token, score = its expiry in ms on Redis' clock
-- KEYS[2]  <prefix>{name}:fence  the name's fence counter (the lock's too)
-- KEYS[3]  <prefix>{name}:semq   waiter queue: member = waiter token,
--          score = ticket (arrival order)
-- KEYS[4]  <prefix>{name}:semw   waiter heartbeats: member = waiter token,
--          score = the ms after which a silent waiter is dropped
-- ARGV[1]  token (random, from the backend; begins with 's')
-- ARGV[2]  permits: at most this many live permits on the name
-- ARGV[3]  ttl of the permit in milliseconds
-- ARGV[4]  '1': when refused, join (or stay in) the queue and refresh the
--          heartbeat; '0': when refused, leave the queue (a last attempt,
--          or a caller that does not wait)
-- ARGV[5]  heartbeat lifetime in milliseconds (ARGV[4] = '1' only)
--
-- Returns the new fence token as a decimal string, or false when refused.
-- Expired permits and silent waiters are reclaimed first, on Redis' TIME.
-- Fairness: a caller at queue position r (0-based; a caller not in the
-- queue counts every waiter as ahead of it) is granted only when
-- in_use + r < permits, so a permit that frees up is kept for the waiters
-- ahead: no later arrival can take the permit an earlier live waiter needs.
-- A counter INCR would refuse is an error before anything at all is written
-- (fence_common.lua), so a failed call leaves no permit behind.
-- #include fence_common.lua
local counter, why = fence_start(KEYS[2], '0')
if not counter then
  return redis.error_reply(why)
end
local function str(n) return string.format('%.0f', n) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token = ARGV[1]
local permits = tonumber(ARGV[2])

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', str(now))
local gone = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', str(now))
for _, m in ipairs(gone) do
  redis.call('ZREM', KEYS[3], m)
end
if #gone > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', str(now))
end

local in_use = redis.call('ZCARD', KEYS[1])
local rank = redis.call('ZRANK', KEYS[3], token)
local ahead = rank or redis.call('ZCARD', KEYS[3])

if in_use + ahead < permits then
  local expiry = now + tonumber(ARGV[3])
  redis.call('ZADD', KEYS[1], str(expiry), token)
  -- The set lives as long as its longest permit.
  local last = redis.call('ZRANGE', KEYS[1], '-1', '-1', 'WITHSCORES')
  redis.call('PEXPIREAT', KEYS[1], last[2])
  if rank then
    redis.call('ZREM', KEYS[3], token)
    redis.call('ZREM', KEYS[4], token)
  end
  redis.call('INCR', KEYS[2])
  return redis.call('GET', KEYS[2])
end

if ARGV[4] == '1' then
  local hb = tonumber(ARGV[5])
  if not rank then
    local tail = redis.call('ZRANGE', KEYS[3], '-1', '-1', 'WITHSCORES')
    local ticket = 1
    if tail[2] then ticket = tonumber(tail[2]) + 1 end
    redis.call('ZADD', KEYS[3], str(ticket), token)
  end
  redis.call('ZADD', KEYS[4], str(now + hb), token)
  -- Every heartbeat ends by now + hb: so may both keys.
  redis.call('PEXPIRE', KEYS[3], str(hb))
  redis.call('PEXPIRE', KEYS[4], str(hb))
elseif rank then
  redis.call('ZREM', KEYS[3], token)
  redis.call('ZREM', KEYS[4], token)
end
return false
