#!lua flags=allow-oom
-- election_resign.lua: give up leadership, only if ARGV[1] holds it.
--
-- KEYS[1]  <prefix>{name}:leader  (see election_campaign.lua)
-- ARGV[1]  node_id that resigns
-- ARGV[2]  optional epoch: when not empty, resign only that term (the
--          background elector passes the epoch it believes it holds)
-- ARGV[3]  optional owner (see election_campaign.lua); defaults to ARGV[1]
--
-- Returns 1 when the leadership was deleted, 0 when ARGV[1] did not hold it
-- (another node leads, nobody leads, or a different term).  The fence
-- counter is untouched: the next leader's epoch is still higher.
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
return 1
