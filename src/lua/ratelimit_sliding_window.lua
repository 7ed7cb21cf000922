#!lua
-- ratelimit_sliding_window.lua: two fixed buckets, the previous one weighted
-- by how much of it still overlaps the sliding window (the approximation
-- Cloudflare describes).  O(1) memory; approximate, see docs/ratelimit.md.
--
-- KEYS[1]  <prefix>{key}:rl:sliding_window  hash: s = start of the current
--          bucket (ms, a multiple of window_ms), c = units in it, p = units in
--          the bucket before it
-- KEYS[2]  (shadow mode only) <prefix>{key}:rl:shadow, the count of
--          requests the limit refused
-- ARGV[1]  max_requests (L)
-- ARGV[2]  window_ms (W), also the bucket width
-- ARGV[3]  cost (1 <= cost <= L)
-- ARGV[4]  '1' consume, '0' peek (reads only, writes nothing)
-- ARGV[5]  pinned clock in ms for tests, or '0' to read Redis' own TIME
--
-- At e ms into the current bucket the units in use are
--     used = c + p * (W - e) / W
-- and a request is admitted when used + cost <= L.  Everything is computed
-- scaled by W, in integers: the C caller keeps L * W <= 2^51, so every product
-- below stays exact in Lua's doubles.  Returns {allowed 1|0, remaining,
-- retry_after_ms, reset_after_ms, pttl}.  A refused request and every peek write
-- nothing; an admission leaves a PEXPIRE of exactly reset_after_ms.
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local consume = ARGV[4] == '1'
local now = tonumber(ARGV[5])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function str(n) return string.format('%.0f', n) end
-- floor(a / b) for non-negative integers below 2^53, corrected for rounding.
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

local key = KEYS[1]
local start = idiv(now, window) * window
local e = now - start
local st = redis.call('HMGET', key, 's', 'c', 'p')
local cur, prev = 0, 0
local s = tonumber(st[1])
if s == start then
  cur, prev = tonumber(st[2]) or 0, tonumber(st[3]) or 0
elseif s == start - window then
  prev = tonumber(st[2]) or 0
end
-- A bucket never legitimately holds more than L (only after L was lowered).
if cur > limit then cur = limit end
if prev > limit then prev = limit end

local prevW = prev * (window - e)       -- the previous bucket's share, times W
local allowed = cur * window + prevW + cost * window <= limit * window
local retry = 0

if allowed and consume then
  cur = cur + cost
  redis.call('HSET', key, 's', str(start), 'c', str(cur), 'p', str(prev))
elseif not allowed then
  local at
  -- Still in this bucket, once the previous bucket's share has shrunk enough:
  -- the smallest e2 with prev * (W - e2) <= (L - cur - cost) * W.
  local budget = (limit - cur - cost) * window
  if budget >= 0 then
    local e2 = window - idiv(budget, prev)
    if e2 < window then at = start + e2 end
  end
  -- Otherwise in the next bucket, where this bucket becomes the previous one:
  -- the smallest e3 with cur * (W - e3) <= (L - cost) * W.
  if at == nil then
    local e3 = 0
    if cur > 0 then
      e3 = window - idiv((limit - cost) * window, cur)
      if e3 < 0 then e3 = 0 end
    end
    at = start + window + e3
  end
  retry = at - now
end

-- Full again when both buckets have slid out of the window.
local reset = 0
if cur > 0 then
  reset = start + 2 * window - now
elseif prev > 0 then
  reset = start + window - now
end
if allowed and consume then
  redis.call('PEXPIRE', key, str(reset))
end

local remaining = idiv(limit * window - cur * window - prevW, window)
if limit * window < cur * window + prevW then remaining = 0 end
-- Shadow mode: the caller admits every request, and counts here, in the
-- same atomic call, each one the limit refuses (which records nothing).
if KEYS[2] and not allowed then
  redis.call('INCR', KEYS[2])
end
-- A refusal also says how long the key itself lives (PTTL: -1 none, -2 no
-- key): the refusal cache (src/ratecache.c) never outlives the key.
local ttl = 0
if not allowed then ttl = redis.call('PTTL', key) end
return {allowed and 1 or 0, remaining, retry, reset, ttl}
