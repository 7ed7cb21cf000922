#!lua
-- ratelimit_gcra.lua: the generic cell rate algorithm (as redis-cell's
-- CL.THROTTLE): one unit every T = W / L ms, with a burst of L.  O(1) memory.
--
-- KEYS[1]  <prefix>{key}:rl:gcra  string '<tat_ms> <rem> <L>': the theoretical
--          arrival time TAT = tat_ms + rem / L ms (0 <= rem < L), kept as a
--          fraction so that W / L needs no rounding
-- KEYS[2]  (shadow mode only) <prefix>{key}:rl:shadow, the count of
--          requests the limit refused
-- ARGV[1]  max_requests (L): the burst, and the units per window
-- ARGV[2]  window_ms (W)
-- ARGV[3]  cost (1 <= cost <= L)
-- ARGV[4]  '1' consume, '0' peek (reads only, writes nothing)
-- ARGV[5]  pinned clock in ms for tests, or '0' to read Redis' own TIME
--
-- A request of cost c moves TAT to max(TAT, now) + c * T and is admitted when
-- the new TAT is at most now + W.  The C caller keeps L * W <= 2^51, so every
-- product below stays exact in Lua's doubles.  Returns {allowed 1|0,
-- remaining, retry_after_ms, reset_after_ms, pttl}.  A refused request and every
-- peek write nothing; an admission sets the key with PX = reset_after_ms.
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
local tm, tr = now, 0
local v = redis.call('GET', key)
if v then
  local a, b, d = string.match(v, '^(%d+) (%d+) (%d+)$')
  if a then
    tm, tr = tonumber(a), tonumber(b)
    -- Stored with another L: round the fraction up, never down.
    if tonumber(d) ~= limit then
      if tr > 0 then tm = tm + 1 end
      tr = 0
    end
  end
end
if tm < now then tm, tr = now, 0 end
-- More debt than these parameters can produce (L or W was lowered, or the
-- clock went back): count it as exactly full.
if tm > now + window or (tm == now + window and tr > 0) then
  tm, tr = now + window, 0
end

-- The TAT this request would leave: + cost * W / L.
local num = tr + cost * window
local q = idiv(num, limit)
local ntm, ntr = tm + q, num - q * limit
local allowed = (ntm - now) * limit + ntr <= window * limit
local retry = 0

if allowed and consume then
  tm, tr = ntm, ntr
elseif not allowed then
  -- Admitted once the new TAT is within W of the clock (rounded up to a ms).
  retry = ntm - window - now
  if ntr > 0 then retry = retry + 1 end
end

-- Full again when TAT is reached (rounded up to a ms).
local reset = tm - now
if tr > 0 then reset = reset + 1 end
if allowed and consume then
  redis.call('SET', key, str(tm) .. ' ' .. str(tr) .. ' ' .. str(limit), 'PX', str(reset))
end

local remaining = idiv((now + window - tm) * limit - tr, window)
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
