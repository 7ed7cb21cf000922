#!lua flags=allow-oom
-- semaphore_release.lua: compare-and-remove for any number of permits.
--
-- KEYS[i]  <prefix>{name_i}:sem   the permits of semaphore name_i
-- ARGV[i]  the token of the caller's permit in KEYS[i]
--
-- Removes each token's permit, and its place in the name's waiter queue
-- (<key>q, <key>w: the same hash tag, so the same slot) if it has one: a
-- waiter that aborted is released through here at its transaction end or
-- backend exit.  Returns an array with 1 (the permit was live: released)
-- or 0 (absent or already expired: not ours any more) per key, like
-- lock_release.  Removing never needs new memory (allow-oom).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for i, key in ipairs(KEYS) do
  local s = redis.call('ZSCORE', key, ARGV[i])
  if s then
    redis.call('ZREM', key, ARGV[i])
  end
  redis.call('ZREM', key .. 'q', ARGV[i])
  redis.call('ZREM', key .. 'w', ARGV[i])
  if s and tonumber(s) > now then out[i] = 1 else out[i] = 0 end
end
return out
