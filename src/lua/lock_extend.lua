#!lua flags=allow-oom
-- lock_extend.lua: compare-and-pexpire.
--
-- KEYS[1]  <prefix>{name}:lock
-- KEYS[2]  <prefix>{name}:lockfence (optional): extended with the lease
--          when it records the caller's token (see lock_extend_token.lua)
-- ARGV[1]  the caller's token
-- ARGV[2]  new ttl in milliseconds, counted from now
--
-- Returns 1 when the lease was still the caller's and now lives ttl ms more,
-- 0 otherwise.  The fence token does not change.  allow-oom: keeping a lease
-- alive needs no new memory, and must work when Redis is full.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if KEYS[2] then
    local rec = redis.call('GET', KEYS[2])
    if rec and string.sub(rec, 1, #ARGV[1] + 1) == ARGV[1] .. ' ' then
      redis.call('PEXPIRE', KEYS[2], ARGV[2])
    end
  end
  return 1
end
return 0
