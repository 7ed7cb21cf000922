#!lua flags=allow-oom
-- lock_extend_token.lua: compare-and-pexpire by token, for a caller that may
-- not be the session that took the lease (a connection pool).
--
-- KEYS[1]  <prefix>{name}:lock   the lease
-- KEYS[2]  <prefix>{name}:fence  the name's fence counter
-- KEYS[3]  <prefix>{name}:lockfence  "<lock token> <its fence>", or none
-- ARGV[1]  the caller's token
-- ARGV[2]  new ttl in milliseconds, counted from now
--
-- Returns the holder's fence as a decimal string when the lease was still
-- the caller's and now lives ttl ms more, false otherwise.  While a lock is
-- held no other lock acquire or campaign of the name draws from the counter
-- (SET NX fails before INCR); a semaphore permit of the same name does, and
-- semaphore_acquire first records the lock's fence in KEYS[3].  So the
-- holder's fence is that record when it names the caller's token, else the
-- counter.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  local rec = redis.call('GET', KEYS[3])
  if rec and string.sub(rec, 1, #ARGV[1] + 1) == ARGV[1] .. ' ' then
    redis.call('PEXPIRE', KEYS[3], ARGV[2])
    return string.sub(rec, #ARGV[1] + 2)
  end
  return redis.call('GET', KEYS[2]) or '0'
end
return false
