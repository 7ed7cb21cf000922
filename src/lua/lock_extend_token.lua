#!lua flags=allow-oom
-- lock_extend_token.lua: compare-and-pexpire by token, for a caller that may
-- not be the session that took the lease (a connection pool).
--
-- KEYS[1]  <prefix>{name}:lock   the lease
-- KEYS[2]  <prefix>{name}:fence  the name's fence counter
-- ARGV[1]  the caller's token
-- ARGV[2]  new ttl in milliseconds, counted from now
--
-- Returns the fence counter as a decimal string when the lease was still the
-- caller's and now lives ttl ms more, false otherwise.  While a lease is held
-- no other acquire of the name can draw from the counter (SET NX fails
-- before INCR), so the counter is the holder's fence.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return redis.call('GET', KEYS[2]) or '0'
end
return false
