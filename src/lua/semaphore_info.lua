#!lua flags=no-writes
-- semaphore_info.lua: what Redis holds for a semaphore now; writes nothing.
--
-- KEYS[1]  <prefix>{name}:sem    live permits, scored by expiry
-- KEYS[2]  <prefix>{name}:fence  the name's fence counter
-- KEYS[3]  <prefix>{name}:semw   waiter heartbeats, scored by deadline
--
-- Returns {in_use, ms until the oldest live permit expires (-1: none),
-- live waiters, last fence issued (false: none)}.  Expired entries still in
-- the sets (not yet reclaimed by an acquire) are not counted.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local after = '(' .. string.format('%.0f', now)
local in_use = redis.call('ZCOUNT', KEYS[1], after, '+inf')
local first = redis.call('ZRANGEBYSCORE', KEYS[1], after, '+inf', 'WITHSCORES', 'LIMIT', '0', '1')
local ttl = -1
if first[2] then ttl = tonumber(first[2]) - now end
local waiters = redis.call('ZCOUNT', KEYS[3], after, '+inf')
return {in_use, ttl, waiters, redis.call('GET', KEYS[2])}
