#!lua flags=allow-oom
-- lock_release.lua: compare-and-delete for any number of leases.
--
-- KEYS[i]  <prefix>{name_i}:lock
-- ARGV[i]  the token the caller holds for KEYS[i]
--
-- Deletes each key only while it still holds the caller's token: a holder
-- whose lease expired and was taken over deletes nothing.  Returns an array
-- with 1 (released) or 0 (not ours any more) per key.
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[i] then
    redis.call('DEL', key)
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
