-- acquire: takes UNITS units of the semaphore at once if they are free and nobody waits, or
-- queues (mode "queue") in ticket order; run again by a waiter polling with its TICKET, it
-- renews the entry and reports where it stands (or that it was granted, evicted or removed as
-- too large for the limit).
--   ARGV: acquire LIMIT LEASE_MS ID MODE OWNER_INFO [TICKET [UNITS]]
--   Reply {state, ticket, deadline, position, now, slot...} (see common.lua).

local refused = prepare('acquire')
if refused then return refused end
local now, deadline = clock()

-- An acquire's reply: {state, ticket, deadline, position, now, slot...}.
local function acquired(state, ticket, position, stored_slots)
  local reply = {state, ticket, deadline, position, now}
  if stored_slots then
    for _, slot in ipairs(split(stored_slots) or {}) do reply[#reply + 1] = tonumber(slot) end
  else
    reply[6] = -1
  end
  return reply
end

local id, mode, owner_info = ARGV[4], ARGV[5], ARGV[6]
local polling = tonumber(ARGV[7] or '0') ~= 0
local units = tonumber(ARGV[8] or '1')
local ticket, bad = guarded(1, 'ZSCORE', id)
if bad then return bad end
local count
if ticket then
  -- Already a member (a retry after a lost reply, a waiter polling, or a caller-chosen id
  -- acquired again): renew it and report where it stands.
  count, bad = reap(now, true, held)
  if not count then return bad end
  held = bad
  if call('ZSCORE', OWNER, id) then
    local stored_slots = call('HGET', SLOTS, id)
    if stored_slots then
      call('ZADD', TIME, int(deadline), id)
      call('DEL', WAKE .. id)
      return acquired(1, tonumber(ticket), 0, stored_slots)
    end
    if units > limit then
      -- A resize left it asking for more than can ever be free: it leaves, and is told.
      remove_entry(id)
      return {4, 0, 0, 0, now, -1}
    end
    call('ZADD', TIME, int(deadline), id)
    return acquired(2, tonumber(ticket), call('ZRANK', OWNER, id) - held + 1)
  end
  -- Its own deadline had passed: it was reaped just now, and queues again below.
elseif polling then
  -- A waiter polling with its ticket whose entry is gone: evicted, or removed as too large
  -- for the limit, and not expired, when its list holds the marker.
  local marker = pcall_redis('LINDEX', WAKE .. id, '0')
  if marker == 'evicted' or marker == 'too-large' then
    call('DEL', WAKE .. id)
    return {marker == 'evicted' and 3 or 4, 0, 0, 0, now, -1}
  end
end
if units > limit then return {-4, limit} end
if not ticket then
  count = call('ZCARD', OWNER)
  -- Someone would wait: first make sure no expired member (or lost key) is in the way.
  if used() + units > limit or count > held then
    count, bad = reap(now, true, held)
    if not count then return bad end
    held = bad
  end
end
-- After reaping, the units are free for this request exactly when nobody waits and enough
-- are left. try never queues: otherwise it fails without writing.
local granted = count == held and used() + units <= limit
if mode == 'try' and not granted then return {0, 0, 0, 0, now, -1} end
-- Writes, each first one to its key guarded, the earlier ones undone on a refusal.
bad = select(2, guarded(2, 'ZADD', int(deadline), id))
if bad then return bad end
if granted or units == 1 then
  bad = select(2, guarded(5, 'HSET', id, owner_info))
else
  bad = select(2, guarded(5, 'HSET', id, owner_info, UNITS .. id, int(units)))
end
if bad then
  call('ZREM', TIME, id)
  return bad
end
local counted = pcall_redis('INCR', COUNTER)
if type(counted) == 'table' then
  call('ZREM', TIME, id)
  call('HDEL', INFO, id, UNITS .. id)
  if string.find(counted.err, 'WRONGTYPE', 1, true) then
    return {-2, COUNTER, call('TYPE', COUNTER)['ok'], 'string'}
  end
  return {-3, COUNTER}
end
ticket = counted
-- Tickets must only grow. If the counter was lost (evicted, deleted) or set back, continue
-- after the newest ticket still queued rather than sort a newcomer ahead of (or level
-- with) those queued.
if count > 0 or ticket < 1 then
  local newest = tonumber(call('ZRANGE', OWNER, '-1', '-1', 'WITHSCORES')[2] or '0')
  if ticket <= newest or ticket < 1 then
    ticket = math.max(newest, 0) + 1
    call('SET', COUNTER, int(ticket))
  end
end
call('ZADD', OWNER, int(ticket), id)
-- A new entry starts with an empty wake list: a caller-chosen id may find an old eviction
-- marker there; a waiter queueing again after its entry expired, the wake-up of that entry
-- (which must not grant this one); a first acquire retried after a lost reply, the marker
-- of an eviction of the entry the lost run made.
call('DEL', WAKE .. id)
-- Tickets only grow, so the new member is last, behind the count - held waiters.
if granted then
  local slots = take_slots(units)
  call('HSET', SLOTS, id, slots)
  return acquired(1, ticket, 0, slots)
end
return acquired(2, ticket, count - held + 1)
