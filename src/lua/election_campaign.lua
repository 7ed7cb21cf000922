#!lua flags=allow-oom
-- election_campaign.lua: become leader, or renew if already leader.
--
-- KEYS[1]  <prefix>{name}:leader  a hash {node, owner, epoch}, PX lease
-- KEYS[2]  <prefix>{name}:fence   the name's fence counter, shared with the
--                                 lease lock of the same name, never expires
-- ARGV[1]  node_id of the candidate
-- ARGV[2]  lease in milliseconds, counted from now
-- ARGV[3]  optional owner: who may renew and resign this term; defaults to
--          ARGV[1].  The background elector passes node_id plus a random tag
--          drawn at its start, so that two servers configured with the same
--          node_id, or an SQL call naming it, cannot renew or resign a term
--          the elector holds.  node is what rp_leader shows.
--
-- Returns the epoch as a decimal string when ARGV[1] is (now) the leader, or
-- false when another node leads.  A leader that campaigns again keeps its
-- epoch and gets a fresh lease; a new leader takes the next value of the
-- fence counter, so epochs and lock fence tokens of one name never collide
-- and every epoch is higher than anything issued before it.  The epoch is
-- returned as the counter's string: Lua numbers are doubles and cannot hold
-- every int64.
--
-- allow-oom: a renewal must keep working when Redis is full (maxmemory with
-- noeviction), or every leader would step down at once; a takeover under
-- memory pressure writes one small hash and one counter increment.
local owner = ARGV[3]
if not owner or owner == '' then owner = ARGV[1] end
local holder = redis.call('HGET', KEYS[1], 'owner')
if holder == owner then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return redis.call('HGET', KEYS[1], 'epoch')
end
if holder then
  return false
end
if redis.call('GET', KEYS[2]) == '9223372036854775807' then
  return redis.error_reply('ERR fence counter exhausted for ' .. KEYS[2])
end
redis.call('INCR', KEYS[2])
local epoch = redis.call('GET', KEYS[2])
redis.call('HSET', KEYS[1], 'node', ARGV[1], 'owner', owner, 'epoch', epoch)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return epoch
