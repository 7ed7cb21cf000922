#!lua flags=allow-oom
-- election_resign.lua: give up leadership, only if ARGV[1] holds it.
--
-- KEYS[1]  <prefix>{name}:leader  (see election_campaign.lua)
-- KEYS[2]  <prefix>{name}:lock    the name's lock, held by the term
-- ARGV[1]  node_id that resigns
-- ARGV[2]  optional epoch: when not empty, resign only that term (the
--          background elector passes the epoch it believes it holds)
-- ARGV[3]  optional owner (see election_campaign.lua); defaults to ARGV[1]
--
-- Returns 1 when the leadership was deleted, 0 when ARGV[1] did not hold it
-- (another node leads, nobody leads, or a different term).  The fence
-- counter is untouched: the next leader's epoch is still higher.  The lock
-- key is deleted only while it is the term's own.
local owner = ARGV[3]
if not owner or owner == '' then owner = ARGV[1] end
local cur = redis.call('HMGET', KEYS[1], 'owner', 'epoch')
if cur[1] ~= owner then
  return 0
end
if ARGV[2] and ARGV[2] ~= '' and cur[2] ~= ARGV[2] then
  return 0
end
redis.call('DEL', KEYS[1])
if KEYS[2] and redis.call('GET', KEYS[2]) == 'election:' .. owner then
  redis.call('DEL', KEYS[2])
end
return 1
