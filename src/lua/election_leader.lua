#!lua flags=no-writes
-- election_leader.lua: who leads an election now.
--
-- KEYS[1]  <prefix>{name}:leader  (see election_campaign.lua)
--
-- Returns {node_id, epoch (decimal string), pttl in ms}, or false when no
-- node leads.  Reads only.  rp_is_leader(name, node_id) uses this too and
-- compares the node in C: one script, one round trip.
local cur = redis.call('HMGET', KEYS[1], 'node', 'epoch')
if not cur[1] then
  return false
end
return {cur[1], cur[2] or '0', redis.call('PTTL', KEYS[1])}
