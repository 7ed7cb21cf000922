#!lua flags=no-writes
-- lock_info.lua: what Redis holds for one lock name, without the token.
--
-- KEYS[1]  <prefix>{name}:lock
-- KEYS[2]  <prefix>{name}:fence
-- KEYS[3]  <prefix>{name}:lockfence  "<lock token> <its fence>", or none
--
-- Returns {held (0|1), pttl (-2 when absent), last fence or false, the
-- holder's fence or false}.  While a lock is held no other lock acquire can
-- touch the counter, but a semaphore permit of the same name can: it first
-- records the lock's fence in KEYS[3] (semaphore_acquire.lua).  So the
-- holder's fence is that record when it names the holder's token, else the
-- counter.
local pttl = redis.call('PTTL', KEYS[1])
local held = 0
if pttl ~= -2 then held = 1 end
local fence = redis.call('GET', KEYS[2])
if not fence then fence = false end
local mine = fence
local holder = redis.call('GET', KEYS[1])
local rec = redis.call('GET', KEYS[3])
if holder and rec and string.sub(rec, 1, #holder + 1) == holder .. ' ' then
  mine = string.sub(rec, #holder + 2)
end
return {held, pttl, fence, mine}
