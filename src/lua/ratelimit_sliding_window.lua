#!lua
-- ratelimit_sliding_window.lua: two fixed buckets, the previous one weighted
-- by how much of it still overlaps the sliding window (the approximation
-- Cloudflare describes).  O(1) memory; approximate, see docs/ratelimit.md.
--
-- KEYS[1]  <prefix>{key}:rl:sliding_window  hash: s = start of the current
--          bucket (ms, a multiple of window_ms), c = units in it, p = units in
--          the bucket before it
-- KEYS[2], ARGV[1..6]  as in ratelimit_common.lua (shadow count; L, W, cost,
--          consume or peek, clock, the count's TTL); here W is also the bucket width
--
-- At e ms into the current bucket the units in use are
--     used = c + p * (W - e) / W
-- and a request is admitted when used + cost <= L.  Everything is computed
-- scaled by W, in integers: the C caller keeps L * W <= 2^51, so every product
-- below stays exact in Lua's doubles.  Returns {allowed 1|0, remaining,
-- retry_after_ms, reset_after_ms, pttl}.  A refused request and every peek write
-- nothing; an admission leaves a PEXPIRE of exactly reset_after_ms.
-- #include ratelimit_common.lua

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
return reply(allowed, remaining, retry, reset)
