#!lua flags=no-writes
-- lock_verify.lua: are these leases all still held with these tokens?
--
-- KEYS[i]  <prefix>{name_i}:lock
-- ARGV[i]  the token the caller believes it holds for KEYS[i]
--
-- Returns 0 when every lease is still held, else the 1-based index of the
-- first one that is not.  Reads only.
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) ~= ARGV[i] then
    return i
  end
end
return 0
