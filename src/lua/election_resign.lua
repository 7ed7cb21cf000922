#!lua
-- election_resign.lua: give up leadership, only if ARGV[1] holds it.
--
-- KEYS[1]  <prefix>{name}:leader  (see election_campaign.lua)
-- ARGV[1]  node_id that resigns
-- ARGV[2]  optional epoch: when not empty, resign only that term (the
--          background elector passes the epoch it believes it holds)
--
-- Returns 1 when the leadership was deleted, 0 when ARGV[1] did not hold it
-- (another node leads, nobody leads, or a different term).  The fence
-- counter is untouched: the next leader's epoch is still higher.
local cur = redis.call('HMGET', KEYS[1], 'node', 'epoch')
if cur[1] ~= ARGV[1] then
  return 0
end
if ARGV[2] and ARGV[2] ~= '' and cur[2] ~= ARGV[2] then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
