-- resize: stores a new limit for every client. Growing promotes the waiters it lets in;
-- shrinking takes nothing from holders, and removes (TOO-LARGE) the waiters that ask for more
-- units than the new limit.
--   ARGV: resize LIMIT LEASE_MS NEW_LIMIT [IDLE_EXPIRY] (LIMIT 0: whatever is stored)
--   IDLE_EXPIRY: as open's (see "Idle expiry" in common.lua): a semaphore without one (one that
--   expired, whose limit this resize stores anew) gets it.
--   Reply {old_limit, new_limit, promoted}.

local new = tonumber(ARGV[4])
if not new or new < 1 or new ~= math.floor(new) then
  return redis.error_reply('fairsem semaphore script: resize needs a limit of at least 1')
end
local refused = prepare('resize', ARGV[5])
if refused then return refused end
local now, deadline = clock()

local old = limit
call('HSET', META, 'limit', int(new))
limit = new
local held_now = repair()
if new < old then
  -- Waiters asking for more units than the new limit can never be granted: removed now
  -- (woken with TOO-LARGE), so the ones behind them move up. O(waiters), for a shrink only.
  local waiters
  if fair then waiters = fair_waiters() else waiters = call('ZRANGE', OWNER, int(held_now), '-1') end
  for i = 1, #waiters, 500 do
    local ids, fields = {}, {}
    for j = i, math.min(i + 499, #waiters) do
      ids[#ids + 1] = waiters[j]
      fields[#fields + 1] = UNITS .. waiters[j]
    end
    local asked = call('HMGET', INFO, unpack(fields))
    for k, id in ipairs(ids) do
      if (tonumber(asked[k] or '1') or 1) > limit then remove_entry(id, 'too-large', lease) end
    end
  end
end
-- A larger limit makes more slots free; after a smaller one, the slots held above it go
-- back to free when their holders leave. The reap that follows promotes under the new
-- limit only.
local count, after = reap(now, true, held_now)
if not count then return after end
settle(after)
return {old, new, promoted_count}
