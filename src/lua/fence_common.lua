-- fence_common.lua: reading a name's fence counter before anything is
-- written (lock_acquire.lua, lock_acquire_all.lua, semaphore_acquire.lua,
-- election_campaign.lua).  Not a script of its own: scripts/embed-lua.sh
-- puts this text where a script says `-- #include fence_common.lua`, and
-- Redis runs, and hashes, the joined text.  Every line here changes the SHA1
-- of all four.
--
-- Defines less(a, b) and fence_start(key, floor).  Integers are compared as
-- decimal strings: Lua numbers are doubles and cannot hold every int64.
--
-- The one thing to know: a script that fails after its first write leaves
-- that write behind (Redis does not roll a script back), and the caller,
-- seeing an error, forgets the lease it asked for.  So every check that can
-- fail runs here, before any write: a counter that INCR would refuse (not a
-- decimal integer, out of range) is refused first, and so is a negative one
-- (no token is ever issued at or below 0).
local function less(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end

-- The counter at key as INCR would read it (absent: '0') and where the next
-- increment starts from (raised to floor); or nil and the error to return.
local function fence_start(key, floor)
  local cur = redis.call('GET', key) or '0'
  if cur ~= '0' and (not string.find(cur, '^[1-9]%d*$') or
                     less('9223372036854775807', cur)) then
    return nil, 'ERR fence counter ' .. key ..
      ' does not hold a non-negative 64-bit integer; nothing was written'
  end
  local start = cur
  if floor and floor ~= '' and less(cur, floor) then start = floor end
  if start == '9223372036854775807' then
    return nil, 'ERR fence counter exhausted for ' .. key
  end
  return cur, start
end
