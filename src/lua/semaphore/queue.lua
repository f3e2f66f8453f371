-- queue: the queue of a semaphore (part of every operation's script, after common.lua and
-- slots.lua): removing entries, promoting waiters in ticket order, reaping expired entries,
-- and prepare(), the checks every operation starts with.

-- Removes the entry of `id` (holder or waiter; a holder's slots are the caller's to pass on)
-- and empties its wake list; `marker`, if given, is then the list's only element (kept
-- `keep_ms`) for the waiter or holder to find, and is pushed to its Client's inbox too.
local function remove_entry(id, marker, keep_ms)
  local list = WAKE .. id
  local client = marker and call('HGET', INFO, INBOX .. id)
  if fair then fair_unqueue(id, call('HGET', INFO, TENANT .. id)) end
  call('ZREM', OWNER, id)
  call('ZREM', TIME, id)
  call('HDEL', INFO, id, UNITS .. id, INBOX .. id, QUEUED .. id, TENANT .. id, WAS .. id)
  call('DEL', list)
  if marker then
    call('LPUSH', list, marker)
    call('PEXPIRE', list, int(keep_ms))
    if client then wake(id, marker, client) end
  end
end

-- promote() of data model 3: the waiters in the order of Grant order (tenants.lua).
local function promote_fair(held, freed)
  local room = limit - (used() - (freed and #freed or 0))
  while room > 0 do
    local tenant, id, ticket, vt, member = fair_next()
    if not tenant then return held end
    local asked = call('HMGET', INFO, UNITS .. id, INBOX .. id)
    local units = tonumber(asked[1] or '1') or 1
    if units > limit then
      remove_entry(id, 'too-large', lease)
    elseif units > room then
      return held
    else
      local slots = take_slots(units, freed)
      call('HSET', SLOTS, id, slots)
      if held == 0 then born(8) end
      -- A new ticket: fencing tokens rise in grant order (see Grant order in tenants.lua).
      local granted = call('INCR', COUNTER)
      local newest = tonumber(call('ZRANGE', OWNER, '-1', '-1', 'WITHSCORES')[2] or '0')
      if granted <= newest then
        granted = newest + 1
        call('SET', COUNTER, int(granted))
        born(3)
      end
      call('ZADD', OWNER, int(granted), id)
      call('ZREM', queue_of(tenant), id)
      call('HSET', INFO, WAS .. id, int(ticket))
      if asked[1] then call('HDEL', INFO, UNITS .. id) end
      fair_granted(tenant, member, vt, units)
      wake(id, int(granted) .. ':' .. slots, asked[2])
      room = room - units
      held = held + 1
      promoted_count = promoted_count + 1
    end
  end
  return held
end

-- Grants units to the waiters at the head of the queue, in ticket order, while the first one
-- left fits: nobody overtakes a waiter that does not (one asking for more than the limit is
-- removed, TOO-LARGE, and the next one moves up). `freed`: slots below the limit that
-- leaving holders just gave up, not yet in free; the promoted take those first, so a slot
-- passes straight from holder to holder. Returns the number of holders after. (In data model 3,
-- the order of tenants.lua.)
local function promote(held, freed)
  if fair then return promote_fair(held, freed) end
  local room = limit - (used() - (freed and #freed or 0))
  while room > 0 do
    -- Each promoted waiter takes at least one unit: at most `room` of them.
    local members = call('ZRANGE', OWNER, int(held), int(held + room - 1), 'WITHSCORES')
    if #members == 0 then return held end
    local ids, tickets, fields = {}, {}, {}
    for i = 1, #members, 2 do
      ids[#ids + 1] = members[i]
      tickets[#tickets + 1] = members[i + 1]
      fields[#fields + 1] = UNITS .. members[i]
      fields[#fields + 1] = INBOX .. members[i]
    end
    -- Per waiter: the units it asks for (when above 1) and its Client's inbox (if any).
    local asked = call('HMGET', INFO, unpack(fields))
    local removed = false
    for i, id in ipairs(ids) do
      local units_field, client = asked[2 * i - 1], asked[2 * i]
      local units = tonumber(units_field or '1') or 1
      if units > limit then
        remove_entry(id, 'too-large', lease)
        removed = true
      elseif units > room then
        return held
      else
        local slots = take_slots(units, freed)
        call('HSET', SLOTS, id, slots)
        if held == 0 then born(8) end
        if units_field then call('HDEL', INFO, fields[2 * i - 1]) end
        -- The ticket tells the waiter that this wake-up is for its entry as it is now, not for
        -- an earlier one of its id (reaped while the waiter could not read it).
        wake(id, tickets[i] .. ':' .. slots, client)
        room = room - units
        held = held + 1
        promoted_count = promoted_count + 1
      end
    end
    -- Everyone looked at was promoted (room is used up, or the queue ended) unless some were
    -- removed: then look further.
    if not removed then return held end
  end
  return held
end

-- After holders left with `slots` (their former slots): the waiters that lets in take those
-- below the limit first; the rest go back to free. Returns the number of holders after.
local function pass_on(held, slots)
  local below, above = {}, {}
  for _, slot in ipairs(slots) do
    if tonumber(slot) < limit then below[#below + 1] = slot else above[#above + 1] = slot end
  end
  if #above > 0 then give_back(above) end
  held = promote(held, below)
  if held == 0 then return settle(held) end
  give_back(below)
  return held
end

-- Removes expired members (all of them at once, rebuilding owner and time as their
-- intersection, when many expired or when `check` finds them out of step: a key deleted or
-- edited behind the semaphore's back) and promotes the waiters that lets in.
-- Returns owner's size and the number of holders afterwards.
local function reap(now, check, held)
  if limit == 0 then return 0, held end  -- a tool's read with no stored limit
  local count, bad = guarded(1, 'ZCARD')
  if bad then return nil, bad end
  local rebuild = false
  if check then
    local timed
    timed, bad = guarded(2, 'ZCARD')
    if bad then return nil, bad end
    rebuild = count ~= timed or held > count
  end
  local cutoff = '(' .. int(now)  -- deadlines strictly before now
  if not rebuild then
    local first
    first, bad = guarded(2, 'ZRANGEBYSCORE', '-inf', cutoff, 'LIMIT', '0', '1')
    if bad then return nil, bad end
    if #first == 0 then return count, promote(held) end
  end
  local expired = call('ZRANGEBYSCORE', TIME, '-inf', cutoff)
  if not rebuild and #expired <= 64 then
    -- A few: one by one, O(log N) each. The first write: info's type is checked by it.
    local fields = {}
    for _, id in ipairs(expired) do
      fields[#fields + 1] = id
      fields[#fields + 1] = UNITS .. id
      fields[#fields + 1] = INBOX .. id
      fields[#fields + 1] = QUEUED .. id
      fields[#fields + 1] = TENANT .. id
      fields[#fields + 1] = WAS .. id
    end
    if fair then
      local tenants = {}
      for _, id in ipairs(expired) do tenants[#tenants + 1] = TENANT .. id end
      tenants = call('HMGET', INFO, unpack(tenants))
      for i, id in ipairs(expired) do fair_unqueue(id, tenants[i]) end
    end
    bad = select(2, guarded(5, 'HDEL', unpack(fields)))
    if bad then return nil, bad end
    local freed, gone = {}, {}
    for _, id in ipairs(expired) do
      local stored = call('HGET', SLOTS, id)
      if stored then
        for _, slot in ipairs(split(stored) or {}) do freed[#freed + 1] = slot end
        gone[#gone + 1] = id
      end
    end
    if #gone > 0 then call('HDEL', SLOTS, unpack(gone)) end
    call('ZREM', TIME, unpack(expired))
    count = count - call('ZREM', OWNER, unpack(expired))
    if #gone == 0 then return count, promote(held) end
    return count, pass_on(held - #gone, freed)
  end
  -- Many, or a rebuild: one O(N) pass. WEIGHTS 1 0 keeps each set's own scores (tickets in
  -- owner, deadlines in time).
  bad = select(2, guarded(5, 'HLEN'))
  if bad then return nil, bad end
  if fair then
    for _, id in ipairs(expired) do fair_unqueue(id, call('HGET', INFO, TENANT .. id)) end
  end
  call('ZREMRANGEBYSCORE', TIME, '-inf', cutoff)
  call('ZINTERSTORE', OWNER, 2, OWNER, TIME, 'WEIGHTS', 1, 0)
  call('ZINTERSTORE', TIME, 2, TIME, OWNER, 'WEIGHTS', 1, 0)
  born(1)  -- a key ZINTERSTORE writes is a new one
  born(2)
  for i = 1, #expired, 500 do  -- unpack() has a stack limit
    local fields = {}
    for j = i, math.min(i + 499, #expired) do
      fields[#fields + 1] = expired[j]
      fields[#fields + 1] = UNITS .. expired[j]
      fields[#fields + 1] = INBOX .. expired[j]
      fields[#fields + 1] = QUEUED .. expired[j]
      fields[#fields + 1] = TENANT .. expired[j]
      fields[#fields + 1] = WAS .. expired[j]
    end
    call('HDEL', INFO, unpack(fields))
  end
  count = call('ZCARD', OWNER)
  if call('HLEN', INFO) > count then
    -- Fields of ids no longer queued (the {units}, {inbox}, {queued}, ... fields of entries
    -- still there count too, hence this pass whenever an entry has one: O(N), like this
    -- rebuild, which is rare, since expired entries are mostly few).
    for _, field in ipairs(call('HKEYS', INFO)) do
      local id = field
      for _, prefix in ipairs({UNITS, INBOX, QUEUED, TENANT, WAS}) do
        if string.sub(field, 1, #prefix) == prefix then id = string.sub(field, #prefix + 1) end
      end
      if not call('ZSCORE', OWNER, id) then call('HDEL', INFO, field) end
    end
  end
  return count, settle(promote(repair()))
end


-- Reads how many hold and how many slots are free, once per run (checking that slots and free
-- are this semaphore's keys), unless prepare() found them known already. settle() puts meta's
-- `slots` back to 0 whenever the last holder leaves, so nobody holding with slots handed out
-- means the slots hash was deleted behind the semaphore's back. Who has which slot is then
-- unknown: every entry is dropped (holders learn at their next renewal that their permits are
-- lost; waiters queue again) rather than a slot handed out twice (not when `repairing`: the
-- caller sets the bookkeeping up anew). Returns true when it dropped them, and a refusal if a
-- key belongs to something else.
local function count_slots(repairing)
  if slots_counted then return false, nil end
  local bad
  held, bad = guarded(8, 'HLEN')
  if bad then return false, bad end
  free_count, bad = guarded(9, 'ZCARD')
  if bad then return false, bad end
  slots_counted = true
  if not repairing and limit > 0 and held == 0 and top ~= 0 then
    bad = forget_everyone()
    if bad then return false, bad end
    return true, nil
  end
  return false, nil
end

-- The refusal for the error `err` of an INCR of the counter: -2 when the counter is a foreign
-- key, -3 when it is not an integer.
local function counter_refusal(err)
  if string.find(err.err, 'WRONGTYPE', 1, true) then
    return {-2, COUNTER, call('TYPE', COUNTER)['ok'], 'string'}
  end
  return {-3, COUNTER}
end

-- The limit `stored` in meta says, or nil if it is not a whole number from 1 up.
local function limit_in(stored)
  local n = tonumber(stored)
  if not n or n < 1 or n ~= math.floor(n) then return nil end
  return n
end

-- meta's fields that every operation starts from: {limit, slots, expiry, expires, model,
-- model_by}, or nil and a refusal when meta is not a hash. (Data model 3's `vtime` is read by
-- prepare(), there only.)
local function read_meta()
  local meta = pcall_redis('HMGET', META, 'limit', 'slots', 'expiry', 'expires', 'model', 'model_by')
  if meta.err then return nil, refusal(4, meta) end
  return meta
end

-- The checks every operation starts with, for operation `op`: refusals come first, before
-- anything is written; then the limit is stored on first use (open and acquire) or followed
-- after a resize, and so is an idle expiry (`wanted`, the IDLE_EXPIRY of open, acquire and
-- resize; see "Idle expiry" in common.lua), and the slot bookkeeping is set up on first use
-- (not by status, evict, release and renew of a semaphore that does not exist: `absent`).
-- `meta`: what read_meta() returned, when the operation read it already (nil: prepare reads
-- it). Returns a refusal, or nil.
local function prepare(op, wanted, meta)
  -- meta first: a later data model is refused before any other key is looked at.
  if not meta then
    local refused
    meta, refused = read_meta()
    if refused then return refused end
  end
  if meta[5] and not (tonumber(meta[5]) and tonumber(meta[5]) <= FAIR_MODEL) then
    return {-7, meta[5], FAIR_MODEL, meta[6]}
  end
  fair = tonumber(meta[5] or '0') == FAIR_MODEL
  if fair then vtime = tonumber(call('HGET', META, 'vtime') or '0') or 0 end
  local tool = op == 'status' or op == 'evict' or op == 'resize' or op == 'tenant'
  if fair or tool then fair_keys() end
  if op == 'open' or tool then
    for _, i in ipairs({1, 2, 3, 4, 5, 8, 9}) do
      local actual = call('TYPE', KEYS[i])['ok']
      if actual ~= 'none' and actual ~= WANTED[i] then return {-2, KEYS[i], actual, WANTED[i]} end
    end
  end
  if op == 'open' then
    local counter = call('GET', COUNTER)
    if counter and not string.match(counter, '^%-?%d+$') then return {-3, COUNTER} end
  end
  local stored = meta[1]
  -- A stored limit that is not one (limit_in()) is refused, never followed.
  if stored and not limit_in(stored) then return {-1, stored} end
  expiry, expires = tonumber(meta[3] or '0') or 0, tonumber(meta[4] or '')
  wanted = tonumber(wanted or '0') or 0
  if op == 'open' and wanted > 0 and expiry > 0 and wanted ~= expiry then return {-6, meta[3]} end
  local adopt = wanted > 0 and expiry == 0
  if limit == 0 then
    if not tool then
      return redis.error_reply(
        'fairsem semaphore script: limit 0 is only for status, evict, resize and tenant')
    end
    limit = tonumber(stored or '0')
  elseif not stored then
    if op == 'open' or op == 'acquire' then call('HSET', META, 'limit', int(limit)) end
  elseif tonumber(stored) ~= limit then
    -- A client opening with another limit is told; one that opened before a resize follows it.
    if op == 'open' then return {-1, stored} end
    limit = tonumber(stored)
  end
  if not stored and op ~= 'open' and op ~= 'acquire' and op ~= 'resize' and op ~= 'tenant' then
    -- No limit stored and nobody queued: the semaphore does not exist (never used, or its keys
    -- expired). Status, evict, release and renew then only read: a key they made would have no
    -- expiry, for good (a monitor polling idle semaphores would bring each one back).
    local count, bad = guarded(1, 'ZCARD')
    if bad then return bad end
    if count == 0 then
      absent = true
      held, free_count, top, slots_counted = 0, 0, 0, true
      return nil
    end
  end
  if adopt then
    -- A new semaphore, or one without an expiry, gets one: from now on its keys expire when
    -- nobody holds or waits.
    expiry = wanted
    call('HSET', META, 'expiry', int(expiry))
    refresh_expiry(server_ms())
  end
  top = tonumber(meta[2] or '0') or 0
  if limit > 0 and (not meta[2] or not stored) then
    -- The slot bookkeeping starts on first use, and again should meta have been lost: existing
    -- holders keep their slots, and the members a semaphore of an earlier version counted as
    -- holders are given slots by the promotion that follows (not for resize, which promotes
    -- under its new limit).
    local bad = select(2, count_slots(true))
    if bad then return bad end
    held = repair()
    if op ~= 'resize' then held = promote(held) end
    return nil
  end
  -- The hot path reads the slot keys only when it needs them (count_slots()): an acquire of a
  -- semaphore nobody holds (no slot handed out) knows that nobody holds and nothing is free,
  -- and a release counts the others only when someone is left after it.
  if op == 'release' then return nil end
  if op == 'acquire' and top == 0 and limit > 0 then
    held, free_count = 0, 0
    return nil
  end
  return (select(2, count_slots()))
end

-- prepare(op), then a reap of whatever expired (status, renew and evict report or act on the
-- semaphore as it is now). Returns a refusal, or nil, the server clock and a lease's deadline.
local function prepare_and_reap(op)
  local refused = prepare(op)
  if refused then return refused end
  local now, deadline = clock()
  if absent then return nil, now, deadline end  -- nothing to reap
  local count, after = reap(now, true, held)
  if not count then return after end
  held = after
  return nil, now, deadline
end
