#!lua flags=allow-oom
-- election_campaign.lua: become leader, or renew if already leader.
--
-- An election is the lock of its name held by a node (docs/decisions/
-- 0004-one-name-one-fence-sequence.md): while a node leads, the lock key of
-- the name holds "election:<owner>", so rp_acquire of the name waits, and
-- the epoch is the fence the name's one counter issued to that holder.
--
-- KEYS[1]  <prefix>{name}:leader  a hash {node, owner, epoch}, PX lease
-- KEYS[2]  <prefix>{name}:fence   the name's fence counter, never expires
-- KEYS[3]  <prefix>{name}:lock    the name's lock, PX lease
-- ARGV[1]  node_id of the candidate
-- ARGV[2]  lease in milliseconds, counted from now
-- ARGV[3]  optional owner: who may renew and resign this term; defaults to
--          ARGV[1].  The background elector passes node_id plus a random tag
--          drawn at its start, so that two servers configured with the same
--          node_id, or an SQL call naming it, cannot renew or resign a term
--          the elector holds.  node is what rp_leader shows.
-- ARGV[4]  optional floor: a new term's epoch is above it (the counter is
--          first raised to at least floor), so a counter lost in Redis never
--          re-issues an epoch already seen; default 0
--
-- Returns the epoch as a decimal string when ARGV[1] is (now) the leader;
-- otherwise {holder kind ('leader' or 'lock'), the counter's value as a
-- decimal string}, so that a follower learns the highest epoch issued.  A
-- leader that campaigns again keeps its epoch and gets a fresh lease, unless
-- its epoch is below floor: then its term ends and a new one begins above
-- floor, as a takeover's would.  No reply is ever an epoch below floor.
-- Integers are compared as decimal strings: Lua numbers are doubles.
--
-- allow-oom: a renewal must keep working when Redis is full (maxmemory with
-- noeviction), or every leader would step down at once; a takeover under
-- memory pressure writes one small hash and one counter increment.
-- #include fence_common.lua
local owner = ARGV[3]
if not owner or owner == '' then owner = ARGV[1] end
local floor = ARGV[4]
if not floor or floor == '' then floor = '0' end
local mark = 'election:' .. owner
local holder = redis.call('HGET', KEYS[1], 'owner')
if holder == owner and less(redis.call('HGET', KEYS[1], 'epoch') or '0', floor) then
  -- The caller has seen a newer epoch than this term's: it led in another
  -- Redis or database meanwhile, or this Redis lost the writes that came
  -- after this term (a failover to a replica that was behind).  Renewed, the
  -- term would hand back the older epoch after the newer one.  It ends here (its lock too, never a lease's)
  -- and the caller campaigns below like anyone else, for a term above floor.
  -- The counter is checked before these writes, as a takeover checks it.
  local cur, err = fence_start(KEYS[2], floor)
  if not cur then
    return redis.error_reply(err)
  end
  redis.call('DEL', KEYS[1])
  if redis.call('GET', KEYS[3]) == mark then
    redis.call('DEL', KEYS[3])
  end
  holder = false
end
if holder == owner then
  local lk = redis.call('GET', KEYS[3])
  if lk and lk ~= mark then
    -- A lease lock of the name was taken while this term had no lock key
    -- (a term begun before 1.1): its fence is newer than our epoch.
    redis.call('DEL', KEYS[1])
    return {'lock', redis.call('GET', KEYS[2]) or '0'}
  end
  redis.call('SET', KEYS[3], mark, 'PX', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return redis.call('HGET', KEYS[1], 'epoch')
end
if holder then
  return {'leader', redis.call('GET', KEYS[2]) or '0'}
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  return {'lock', redis.call('GET', KEYS[2]) or '0'}
end
local cur, start = fence_start(KEYS[2], floor)
if not cur then
  return redis.error_reply(start)
end
if start ~= cur then
  redis.call('SET', KEYS[2], start)
end
redis.call('INCR', KEYS[2])
local epoch = redis.call('GET', KEYS[2])
redis.call('HSET', KEYS[1], 'node', ARGV[1], 'owner', owner, 'epoch', epoch)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('SET', KEYS[3], mark, 'PX', ARGV[2])
return epoch
