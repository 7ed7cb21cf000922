#!lua
-- ratelimit_gcra.lua: the generic cell rate algorithm (as redis-cell's
-- CL.THROTTLE): one unit every T = W / L ms, with a burst of L.  O(1) memory.
--
-- KEYS[1]  <prefix>{key}:rl:gcra  string '<tat_ms> <rem> <L>': the theoretical
--          arrival time TAT = tat_ms + rem / L ms (0 <= rem < L), kept as a
--          fraction so that W / L needs no rounding
-- KEYS[2], ARGV[1..6]  as in ratelimit_common.lua (shadow count; L, W, cost,
--          consume or peek, clock, the count's TTL); here L is also the burst
--
-- A request of cost c moves TAT to max(TAT, now) + c * T and is admitted when
-- the new TAT is at most now + W.  The C caller keeps L * W <= 2^51, so every
-- product below stays exact in Lua's doubles.  Returns {allowed 1|0,
-- remaining, retry_after_ms, reset_after_ms, pttl}.  A refused request and every
-- peek write nothing; an admission sets the key with PX = reset_after_ms.
-- #include ratelimit_common.lua

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
return reply(allowed, remaining, retry, reset)
