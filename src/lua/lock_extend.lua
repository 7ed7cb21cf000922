#!lua flags=allow-oom
-- lock_extend.lua: compare-and-pexpire.
--
-- KEYS[1]  <prefix>{name}:lock
-- ARGV[1]  the caller's token
-- ARGV[2]  new ttl in milliseconds, counted from now
--
-- Returns 1 when the lease was still the caller's and now lives ttl ms more,
-- 0 otherwise.  The fence token does not change.  allow-oom: keeping a lease
-- alive needs no new memory, and must work when Redis is full.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
