-- acquire: takes UNITS units of the semaphore at once if they are free and nobody waits, or
-- queues (mode "queue") in ticket order; run again by a waiter polling with its TICKET, it
-- renews the entry and reports where it stands (or that it was granted, evicted or removed as
-- too large for the limit).
--   ARGV: acquire LIMIT LEASE_MS ID MODE OWNER_INFO
--               [TICKET [UNITS [CLIENT [MAX_WAITERS [IDLE_EXPIRY [FRESH [TENANT]]]]]]]
--   CLIENT: the Client whose inbox is to wake this waiter (see Wake-ups in common.lua; empty:
--   none). MAX_WAITERS: a request that would queue behind this many waiters or more is refused
--   with {-5, waiting}, writing nothing; one already queued (polling) never is. 0 or none: no
--   bound. IDLE_EXPIRY: see "Idle expiry" in common.lua. FRESH 1: the id was drawn at random for
--   this call and never sent before (see below). TENANT: whose request it is (tenants.lua;
--   empty or absent: the default tenant); the first one named upgrades the semaphore.
--   Reply {state, ticket, deadline, position, now, slot...} (see common.lua).

local meta, refused = read_meta()
if refused then return refused end
-- The uncontended path, first and inline: a fresh id (FRESH 1, not polling) asks for 1 to limit
-- units of a semaphore nobody holds or waits on, whose stored limit is the one the caller
-- passed, with no idle expiry and no later data model. It makes the writes the general path
-- below makes in that case, in the same order (the first one to each key guarded, undone alike
-- on a refusal), and gives the same reply, but without that path's helpers and tables, which
-- cost about a sixth of an uncontended pair's Redis time
-- (docs/benchmarks.md#where-the-time-goes). Anything else goes on to the general path, which
-- takes the meta read here.
do
  -- (A holder, the general path's common case, shows in meta's `slots`, tested first.)
  local units, stored
  if meta[2] == '0' and not meta[5] and meta[1] == ARGV[2] and ARGV[12] == '1'
      and (ARGV[13] or '') == '' then
    units, stored = tonumber(ARGV[8] or '1'), limit_in(meta[1])
  end
  if stored and (tonumber(meta[3] or '0') or 0) == 0
      and not ((tonumber(ARGV[11] or '0') or 0) > 0) and tonumber(ARGV[7] or '0') == 0
      and units and units >= 1 and units % 1 == 0 and units <= stored then
    local owners = pcall_redis('ZCARD', OWNER)
    if type(owners) == 'table' then return refusal(1, owners) end
    if owners == 0 then
      local now, deadline = clock()
      local id, slots, reply = ARGV[4], '0', {1, 0, deadline, 0, now, 0}
      for slot = 1, units - 1 do
        slots = slots .. ',' .. int(slot)
        reply[6 + slot] = slot
      end
      call('HSET', META, 'slots', int(units))
      local bad, r = nil, pcall_redis('HSET', SLOTS, id, slots)
      if type(r) == 'table' then
        bad = refusal(8, r)
      else
        r = pcall_redis('ZADD', TIME, int(deadline), id)
        if type(r) == 'table' then
          bad = refusal(2, r)
        else
          r = pcall_redis('HSET', INFO, id, ARGV[6])
          if type(r) == 'table' then
            bad = refusal(5, r)
            call('ZREM', TIME, id)
          end
        end
        if bad then call('HDEL', SLOTS, id) end
      end
      local ticket
      if not bad then
        ticket = pcall_redis('INCR', COUNTER)
        if type(ticket) == 'table' then
          bad = counter_refusal(ticket)
          call('ZREM', TIME, id)
          call('HDEL', INFO, id, UNITS .. id, INBOX .. id, QUEUED .. id)
          call('HDEL', SLOTS, id)
        end
      end
      if bad then
        call('HSET', META, 'slots', '0')
        return bad
      end
      if ticket <= 1 then
        -- A new counter, or one set back behind the semaphore's back: from the server's clock
        -- (see the general path).
        ticket = now * TICKETS_PER_MS
        call('SET', COUNTER, int(ticket))
      end
      call('ZADD', OWNER, int(ticket), id)
      reply[2] = ticket
      return reply
    end
  end
end
refused = prepare('acquire', ARGV[11], meta)
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
local client = ARGV[9]
if client == '' then client = nil end
local tenant = ARGV[13] or ''
-- FRESH: the client's first call with an id it has just drawn at random, so the id has no
-- entry, no wake list and no marker here (a call sent again after a lost reply says 0).
local fresh = ARGV[12] == '1' and not polling
local count, bad = guarded(1, 'ZCARD')
if bad then return bad end
if count > 0 then
  -- Someone holds or waits: how many hold and how many slots are free matter now.
  local forgot
  forgot, bad = count_slots()
  if bad then return bad end
  if forgot then count = 0 end
end
-- Nobody is a member of an empty owner, and a fresh id is none either.
local ticket = nil
if count > 0 and not fresh then ticket = call('ZSCORE', OWNER, id) end
if ticket then
  -- Already a member (a retry after a lost reply, a waiter polling, or a caller-chosen id
  -- acquired again): renew it and report where it stands.
  count, bad = reap(now, true, held)
  if not count then return bad end
  held = bad
  local score = call('ZSCORE', OWNER, id)
  if score then
    -- In data model 3 the reap may just have promoted it under a new ticket (tenants.lua):
    -- the reply names the ticket it holds by now, not the one it waited under.
    ticket = score
    -- Only a run that writes a deadline keeps the keys alive (see "Idle expiry", common.lua).
    keep_alive(now)
    local stored_slots = call('HGET', SLOTS, id)
    if stored_slots then
      call('ZADD', TIME, int(deadline), id)
      call('DEL', WAKE .. id)
      return acquired(1, tonumber(ticket), 0, stored_slots)
    end
    if units > limit then
      -- A resize left it asking for more than can ever be free: it leaves, and is told.
      remove_entry(id)
      promote(held)  -- (every removal of a waiter lets in those behind it that fit)
      return {4, 0, 0, 0, now, -1}
    end
    call('ZADD', TIME, int(deadline), id)
    if fair then
      -- Its place in its tenant's queue.
      local place = fair_position(id, call('HGET', INFO, TENANT .. id))
      return acquired(2, tonumber(ticket), place or 1)
    end
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
local max_waiters = tonumber(ARGV[10] or '0')
if not granted and not polling and max_waiters > 0 and count - held >= max_waiters then
  return {-5, count - held}
end
-- Writes, each first one to its key guarded, the earlier ones undone on a refusal. A refused
-- request above wrote nothing, not even the expiry's push.
keep_alive(now)
-- The first request naming a tenant upgrades the semaphore (tenants.lua).
if tenant ~= '' and not fair then upgrade_to_fair(held) end
-- A grant when nobody held (prepare() knew it without reading slots): slots' first access is
-- the first write, guarded, and undone (with the slot taken) should a later one be refused.
local slots
local early = granted and not slots_counted
if early then
  slots = take_slots(units)
  bad = select(2, guarded(8, 'HSET', id, slots))
  if bad then
    call('HSET', META, 'slots', '0')
    return bad
  end
end
local function refuse(refusal)
  if early then
    call('HDEL', SLOTS, id)
    call('HSET', META, 'slots', '0')
  end
  return refusal
end
bad = select(2, guarded(2, 'ZADD', int(deadline), id))
if bad then return refuse(bad) end
local fields = {id, owner_info}
if tenant ~= '' then
  fields[#fields + 1] = TENANT .. id
  fields[#fields + 1] = tenant
end
if not granted then
  if units ~= 1 then
    fields[#fields + 1] = UNITS .. id
    fields[#fields + 1] = int(units)
  end
  if client then
    fields[#fields + 1] = INBOX .. id
    fields[#fields + 1] = client
  end
  fields[#fields + 1] = QUEUED .. id
  fields[#fields + 1] = int(now)
end
bad = select(2, guarded(5, 'HSET', unpack(fields)))
if bad then
  call('ZREM', TIME, id)
  return refuse(bad)
end
local counted = pcall_redis('INCR', COUNTER)
if type(counted) == 'table' then
  local refused_counter = counter_refusal(counted)
  call('ZREM', TIME, id)
  call('HDEL', INFO, id, UNITS .. id, INBOX .. id, QUEUED .. id, TENANT .. id)
  return refuse(refused_counter)
end
ticket = counted
-- Tickets must only grow. A new counter (a new semaphore, one whose keys expired, a counter
-- lost) or one set back starts from the server's clock, above every ticket of the semaphore's
-- earlier lives, whether or not this run knows of an expiry (a client that passes none may make
-- again a semaphore that had one). A counter behind the newest ticket still queued continues
-- after it rather than sort a newcomer ahead of (or level with) those queued.
local lowest, counter_set = 1, counted == 1
if counted <= 1 then lowest = now * TICKETS_PER_MS end
if count > 0 or ticket < lowest then
  local newest = tonumber(call('ZRANGE', OWNER, '-1', '-1', 'WITHSCORES')[2] or '0')
  if ticket <= newest or ticket < lowest then
    ticket = math.max(newest + 1, lowest)
    call('SET', COUNTER, int(ticket))  -- (a SET drops the key's expiry)
    counter_set = true
  end
end
call('ZADD', OWNER, int(ticket), id)
if counter_set then born(3) end
if fair and not granted then fair_enqueue(id, ticket, tenant) end
-- A new entry starts with an empty wake list: a caller-chosen id may find an old eviction
-- marker there; a waiter queueing again after its entry expired, the wake-up of that entry
-- (which must not grant this one); a first acquire retried after a lost reply, the marker
-- of an eviction of the entry the lost run made. A fresh id has none of these.
if not fresh then call('DEL', WAKE .. id) end
-- Tickets only grow, so the new member is last, behind the count - held waiters.
if granted and slots_counted then
  slots = take_slots(units)
  call('HSET', SLOTS, id, slots)
end
if granted and held == 0 then born(8) end
-- The first entry of a semaphore nobody held or waited on: owner, time and info are new keys.
if count == 0 then
  born(1)
  born(2)
  born(5)
end
if granted then return acquired(1, ticket, 0, slots) end
if fair then
  -- A tenant that becomes active starts at the semaphore's virtual time, which may put it
  -- first among the tenants while its units are free: it is promoted now (work-conserving),
  -- and this reply, not a wake-up, tells it so.
  promote(held)
  local promoted = call('HGET', SLOTS, id)
  if promoted then
    -- (Its wake-up in its Client's inbox is one for a permit already granted, which the
    -- waker keeps unclaimed as it does when a poll and a promotion cross.)
    if not client then call('DEL', WAKE .. id) end
    return acquired(1, tonumber(call('ZSCORE', OWNER, id)), 0, promoted)
  end
  return acquired(2, ticket, fair_position(id, tenant) or 1)
end
return acquired(2, ticket, count - held + 1)
