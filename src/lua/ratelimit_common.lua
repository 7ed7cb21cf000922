-- ratelimit_common.lua: the prologue the three rate-limit algorithms share
-- (ratelimit_gcra.lua, ratelimit_sliding_log.lua, ratelimit_sliding_window.lua).
-- Not a script of its own: scripts/embed-lua.sh puts this text where a script
-- says `-- #include ratelimit_common.lua`, and Redis runs, and hashes, the
-- joined text.  Every line here changes the SHA1 of all three.
--
-- KEYS[1]  the algorithm's state (the script's own KEYS[1])
-- KEYS[2]  (shadow mode only) <prefix>{key}:rl:shadow, the count of
--          requests the limit refused
-- ARGV[1]  max_requests (L): units allowed in any window
-- ARGV[2]  window_ms (W)
-- ARGV[3]  cost: units this request takes (1 <= cost <= L)
-- ARGV[4]  '1' consume, '0' peek (reads only, writes nothing), '2' peek at a
--          request that can never be admitted (cost > L, sent as cost = L)
--          and count it as refused in KEYS[2]
-- ARGV[5]  pinned clock in ms for tests, or '0' to read Redis' own TIME
-- ARGV[6]  the TTL in ms each increment of KEYS[2] gives it
--          (redis_primitives.ratelimit_shadow_ttl)
--
-- Defines limit, window, cost, consume and now from those, str(n), idiv(a, b)
-- and reply(...), which every algorithm returns through.
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local consume = ARGV[4] == '1'
local never = ARGV[4] == '2'
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
-- The answer: {allowed 1|0, remaining, retry_after_ms, reset_after_ms, pttl}.
-- Shadow mode: the caller admits every request, and counts here, in the
-- same atomic call, each one the limit refuses (which records nothing) and
-- each one it can never admit.  Every increment sets the count's TTL, so
-- the count lives as long as refusals keep coming, and ARGV[6] ms more.
-- A refusal also says how long the key itself lives (PTTL: -1 none, -2 no
-- key): the refusal cache (src/prim/ratecache.c) never outlives the key.
local function reply(allowed, remaining, retry, reset)
  if KEYS[2] and (never or not allowed) then
    redis.call('INCR', KEYS[2])
    redis.call('PEXPIRE', KEYS[2], ARGV[6])
  end
  local ttl = 0
  if not allowed then ttl = redis.call('PTTL', KEYS[1]) end
  return {allowed and 1 or 0, remaining, retry, reset, ttl}
end
