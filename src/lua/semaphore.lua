-- semaphore: every operation on one fair, lease-based counting semaphore, each one atomic.
--
-- KEYS (all share the hash tag {NAME}, so one semaphore lives in one cluster slot):
--   1 P:{NAME}:owner    ZSET  member = permit id, score = ticket (holders and waiters)
--   2 P:{NAME}:time     ZSET  member = permit id, score = lease deadline, ms of this server's clock
--   3 P:{NAME}:counter  STRING ticket counter (INCR only; a ticket is the fencing token)
--   4 P:{NAME}:meta     HASH  limit = the current limit; slots = how many slot numbers have
--                             been handed out so far (the slots at or above it are free)
--   5 P:{NAME}:info     HASH  permit id -> owner info (who holds or waits); and for a waiter
--                             that asks for more than one unit, {units}ID -> how many
--   6 P:{NAME}:wake:    prefix of the per-waiter wake lists (LIST P:{NAME}:wake:ID)
--   7 P:{NAME}:released: prefix of release receipts (STRING P:{NAME}:released:ID, one lease)
--   8 P:{NAME}:slots    HASH  holder id -> its slots, ascending, comma-separated (one per unit
--                             it holds): the holders are exactly its fields
--   9 P:{NAME}:free     ZSET  the free slots below meta's `slots` (member = score = slot)
--
-- Units. Every slot below meta's `slots` is either a holder's or in free, so the units held
-- are `slots` minus the size of free, read without walking the holders.
--
-- ARGV: 1 operation, 2 limit, 3 lease in ms, then per operation:
--   open                          check key types and the limit; store the limit if unset
--   acquire  ID MODE OWNER_INFO [TICKET [UNITS]]
--                                 MODE "try" (never queues) or "queue"; TICKET: the ticket a
--                                 waiter polling again already has (0 or absent: none yet);
--                                 UNITS: how many units (slots) it asks for, 1 when absent
--   release  ID TICKET RECEIPT_MS [leaving | keep K]
--                                 TICKET 0: whatever entry ID has; "leaving": a waiter giving up
--                                 (either clears its wake list); "keep K": a holder gives back
--                                 all but its K lowest slots and keeps its permit
--   renew    ID TICKET ...        one call renews every permit of a process
--   status
--   evict    ID                   remove ID (holder or waiter) on an operator's request
--   resize   NEW_LIMIT            store a new limit (see "Limits" below)
-- Limit 0 ("whatever is stored") is accepted by status, evict and resize only, for tools that
-- do not know the limit; with no limit stored, status and evict neither reap nor promote.
--
-- Holders and slots. A member of owner holds a permit iff it has a field in slots; its value
-- lists the permit's slots, one per unit, numbers 0 .. limit-1 that no other holder has. The
-- holders are always the first members in ticket order (a waiter is only ever promoted from
-- the head of the queue), and after every run either nobody waits or the first waiter asks for
-- more units than are free: strict FIFO for every weight, so a small request never overtakes
-- a large one queued before it (which could otherwise starve). A holder that leaves (release,
-- reap, evict) hands its slots to the waiters its leaving promotes, or puts them back; an
-- acquire granted at once takes the lowest free slots. Since a waiter is promoted only behind
-- every holder, for one slot tickets strictly increase from holder to holder: the pair (slot,
-- ticket) fences.
--
-- Limits. Open refuses a limit other than the stored one; every other operation follows the
-- stored limit, so clients keep working through a resize. Growing promotes waiters at once;
-- shrinking takes nothing away: holders beyond the new limit keep their permits (and slots)
-- until they leave, and nobody is promoted until fewer than the new limit units are held. A
-- waiter asking for more units than the limit can never be granted: when it reaches the head
-- of the queue, or polls, it is removed with the marker TOO-LARGE in its wake list (its
-- acquire fails), and the waiters behind it move up. A new request for more units than the
-- stored limit is refused ({-4, limit}) with nothing written.
--
-- A permit is ID *and* TICKET: release and renew act only on the entry with that ticket, so a
-- holder whose entry expired can never touch a later permit that reuses its id.
--
-- Eviction leaves the marker EVICTED as the only element of the evicted id's wake list, so the
-- waiter blocked on it, a waiter polling with its TICKET, and a holder's next renewal can each
-- tell "evicted" from "expired". A new entry for the id clears the list first. A promotion
-- pushes the promoted waiter's slot onto its wake list.
--
-- Reaping removes members whose deadline has passed and promotes the waiters their removal
-- lets in, waking each through its own wake list. It runs wherever someone could be kept
-- waiting by an expired member: an acquire that finds every permit taken, a waiter's poll,
-- renew, status, evict and resize (an acquire below the limit and a release need not).
-- "Passed" is strict: the clock is read in whole milliseconds (rounded down), so a deadline
-- equal to now may still be up to 1 ms ahead; reaping it would end a lease before the
-- client's own estimate.
--
-- Cost: each redis.call costs about a microsecond, and each function the script defines is
-- built again on every run, so the hot operations (acquire, release) make as few calls as
-- they can. Key types: open, status, evict and resize check all seven keys with TYPE; the
-- other operations read slots and free first (guarded) and make their first access to each
-- other key through guarded(), a read or a first write whose WRONGTYPE error becomes a refusal
-- (undoing the writes before it), so a foreign key is never written to.
--
-- Replies are arrays. A negative first element is a refusal and nothing was written (but for
-- maintenance a refused call may have done first: storing the limit on first use, setting up
-- the slot bookkeeping, reaping; and a release that finds time foreign has already removed the
-- entry's owner info):
--   {-1, stored_limit}                    the semaphore was opened with another limit
--   {-2, key, actual_type, wanted_type}   a key under the prefix belongs to something else
--   {-3, key}                             the counter is not an integer
--   {-4, limit}                           acquire: more units asked than the limit (ever)
-- Otherwise:
--   open     {1}
--   acquire  {state, ticket, deadline, position, now, slot...}
--                                         state 1 granted (one slot per unit, ascending), 2
--                                         queued, 0 full, 3 the polling waiter was evicted, 4 it
--                                         was removed as too large for the limit; a single
--                                         slot -1 unless granted
--   release  {state}                      1 a holder released (or, with keep, now holds at
--                                         most K units), 2 a waiter left, 0 not present, 3
--                                         this permit was released by an earlier run
--   renew    {now, deadline, r...}        per id: 1 holder, 0 lost, -1 evicted,
--                                         k >= 2 waiting at k - 1
--   status   {now, limit, counter, id, ticket, deadline, info, units, slots, ...}
--                                         in ticket order; slots as stored, "" for a waiter
--   evict    {state}                      1 a holder removed, 2 a waiter removed, 0 not present,
--                                         3 evicted already (its marker is still there)
--   resize   {old_limit, new_limit, promoted}
--
-- Every operation is idempotent for a given permit id, so a client may repeat one whose reply
-- was lost. Runs on its own:
--   redis-cli --eval src/lua/semaphore.lua o t c m i w: r: s f , status 1 1000

local OWNER, TIME, COUNTER, META, INFO, WAKE = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local RELEASED, SLOTS, FREE = KEYS[7], KEYS[8], KEYS[9]
local WANTED = {'zset', 'zset', 'string', 'hash', 'hash', nil, nil, 'hash', 'zset'}
local UNITS = '{units}'  -- info's field {units}ID: the units waiter ID asks for, when above 1
local op, limit, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local call, pcall_redis = redis.call, redis.pcall

-- Runs a command on KEYS[i]. Returns its reply, or nil and refusal -2 naming the key when the
-- key has the wrong type (callers return the refusal, undoing their earlier writes first).
local function guarded(i, command, ...)
  local r = pcall_redis(command, KEYS[i], ...)
  if type(r) == 'table' and r.err then
    if string.find(r.err, 'WRONGTYPE', 1, true) then
      return nil, {-2, KEYS[i], call('TYPE', KEYS[i])['ok'], WANTED[i]}
    end
    return error(r)  -- any other error ends the script as it is
  end
  return r
end

-- Numbers go to Redis as integer strings: Lua would format large ones with an exponent.
local function int(n) return string.format('%d', n) end

-- A holder's slots as stored ("3" or "0,2,5"): a list of strings, or nil if any is not a
-- whole number from 0 (only something edited behind the semaphore's back).
local function split(stored)
  local slots = {}
  for slot in string.gmatch(stored, '[^,]+') do
    local n = tonumber(slot)
    if not n or n < 0 or n ~= math.floor(n) then return nil end
    slots[#slots + 1] = slot
  end
  if #slots == 0 then return nil end
  return slots
end

local function by_number(a, b) return tonumber(a) < tonumber(b) end
local function join(slots)
  table.sort(slots, by_number)
  return table.concat(slots, ',')
end

local function wake(id, message)
  -- A foreign key in the way only costs that waiter its wake-up: it polls.
  if type(pcall_redis('LPUSH', WAKE .. id, message)) == 'number' then
    -- A waiter polls at least every lease/3: a list nobody pops is gone after one lease.
    call('PEXPIRE', WAKE .. id, int(lease))
  end
end

-- How many slots free holds, when known (nil: not read yet). It saves a ZPOPMIN on an empty
-- set and a DEL of a missing one, the common case of a semaphore that is not full.
local free_count
-- meta's `slots`: how many slot numbers have been handed out (each one below it is a holder's
-- or free). Set from meta below.
local top = 0

-- The units held: every slot below top that is not free.
local function used()
  if not free_count then free_count = call('ZCARD', FREE) end
  return top - free_count
end

-- Puts slots back into free.
local function give_back(slots)
  local pairs_to_add = {}
  for _, slot in ipairs(slots) do
    pairs_to_add[#pairs_to_add + 1] = slot
    pairs_to_add[#pairs_to_add + 1] = slot
  end
  for i = 1, #pairs_to_add, 1000 do  -- unpack() has a stack limit
    call('ZADD', FREE, unpack(pairs_to_add, i, math.min(i + 999, #pairs_to_add)))
  end
  if free_count then free_count = free_count + #pairs_to_add / 2 end
end

-- Sets the slot bookkeeping up again from owner and slots: on first use, after a resize, when
-- meta was lost, and when something was edited behind the semaphore's back. Drops the slots of
-- ids no longer in owner, keeps the holders the first members in ticket order (a holder after
-- a gap, or with a slot that is not a number or is taken twice, becomes a waiter again, asking
-- for as many units as it had), and refills free with every slot below the high-water mark
-- that no holder has: O(holders + the most units ever held at once). Returns the number of
-- holders.
local function repair()
  local entries = call('HGETALL', SLOTS)
  local slots_of, kept = {}, 0
  for i = 1, #entries, 2 do
    local id, slots = entries[i], split(entries[i + 1])
    if slots and call('ZSCORE', OWNER, id) then
      slots_of[id] = slots
      kept = kept + 1
    else
      call('HDEL', SLOTS, id)
      call('DEL', WAKE .. id)
    end
  end
  local used_slots, held = {}, 0
  if kept > 0 then
    for _, id in ipairs(call('ZRANGE', OWNER, '0', int(kept - 1))) do
      local slots = slots_of[id]
      if not slots then break end
      local clash = false
      for _, slot in ipairs(slots) do
        if used_slots[tonumber(slot)] then clash = true end
      end
      if clash then break end
      for _, slot in ipairs(slots) do used_slots[tonumber(slot)] = true end
      slots_of[id] = nil
      held = held + 1
    end
    -- Demoted: a wake-up pushed with the slots it had must not be taken as a grant.
    for id, slots in pairs(slots_of) do
      call('HDEL', SLOTS, id)
      call('DEL', WAKE .. id)
      if #slots > 1 then call('HSET', INFO, UNITS .. id, int(#slots)) end
    end
  end
  local new_top = tonumber(call('HGET', META, 'slots') or '0') or 0
  for slot in pairs(used_slots) do new_top = math.max(new_top, slot + 1) end
  call('DEL', FREE)
  free_count = 0
  top = new_top
  local free = {}
  for slot = 0, top - 1 do
    if not used_slots[slot] then free[#free + 1] = int(slot) end
  end
  give_back(free)
  call('HSET', META, 'slots', int(top))
  return held
end

-- Drops every entry and the slot bookkeeping (see its caller). Returns a refusal if one of the
-- keys it would delete belongs to something else.
local function forget_everyone()
  for _, i in ipairs({1, 2, 5}) do
    local bad = select(2, guarded(i, i == 5 and 'HLEN' or 'ZCARD'))
    if bad then return bad end
  end
  call('DEL', OWNER, TIME, INFO, FREE)
  call('HSET', META, 'slots', '0')
  free_count, top = 0, 0
  return nil
end

-- The lowest free slot: from free, else the next one never handed out (so a limit of 10^9
-- needs no set of 10^9 slots). Only called while fewer than limit units are held, so the
-- slot is below the limit (free holds slots above it only after a shrink, and then every one
-- below it is held or free). Nil only when the bookkeeping is broken beyond repair.
local function take_slot()
  for _ = 1, 2 do
    if free_count ~= 0 then
      local popped = call('ZPOPMIN', FREE)
      if popped[1] then
        if free_count then free_count = free_count - 1 end
        return popped[1]
      end
      free_count = 0
    end
    local handed_out = call('HINCRBY', META, 'slots', 1)
    if handed_out <= limit then
      top = handed_out
      return int(handed_out - 1)
    end
    call('HINCRBY', META, 'slots', -1)
    repair()  -- every slot below the limit seems taken, yet fewer than limit units are held
  end
  return nil
end

-- `n` slots for a grant: from `freed` (slots holders just left) while they last, else free.
local function take_slots(n, freed)
  local slots = {}
  for _ = 1, n do
    local slot = (freed and table.remove(freed)) or take_slot()
    if not slot then return error('fairsem semaphore script: no free slot for a grant') end
    slots[#slots + 1] = slot
  end
  return join(slots)
end

-- Removes the entry of `id` (holder or waiter; a holder's slots are the caller's to pass on)
-- and empties its wake list; `marker`, if given, is then the list's only element (kept
-- `keep_ms`) for the waiter or holder to find.
local function remove_entry(id, marker, keep_ms)
  local list = WAKE .. id
  call('ZREM', OWNER, id)
  call('ZREM', TIME, id)
  call('HDEL', INFO, id, UNITS .. id)
  call('DEL', list)
  if marker then
    call('LPUSH', list, marker)
    call('PEXPIRE', list, int(keep_ms))
  end
end

-- Waiters promoted by this run (resize reports them).
local promoted_count = 0

-- Grants units to the waiters at the head of the queue, in ticket order, while the first one
-- left fits: nobody overtakes a waiter that does not (one asking for more than the limit is
-- removed, TOO-LARGE, and the next one moves up). `freed`: slots below the limit that
-- leaving holders just gave up, not yet in free; the promoted take those first, so a slot
-- passes straight from holder to holder. Returns the number of holders after.
local function promote(held, freed)
  local room = limit - (used() - (freed and #freed or 0))
  while room > 0 do
    -- Each promoted waiter takes at least one unit: at most `room` of them.
    local ids = call('ZRANGE', OWNER, int(held), int(held + room - 1))
    if #ids == 0 then return held end
    local fields = {}
    for i, id in ipairs(ids) do fields[i] = UNITS .. id end
    local asked = call('HMGET', INFO, unpack(fields))
    local removed = false
    for i, id in ipairs(ids) do
      local units = tonumber(asked[i] or '1') or 1
      if units > limit then
        remove_entry(id, 'too-large', lease)
        removed = true
      elseif units > room then
        return held
      else
        local slots = take_slots(units, freed)
        call('HSET', SLOTS, id, slots)
        if asked[i] then call('HDEL', INFO, fields[i]) end
        wake(id, slots)
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

-- With nobody holding, every slot is free: the bookkeeping starts over, so an idle semaphore
-- keeps only its counter and meta. Returns `held`.
local function settle(held)
  if held == 0 then
    if free_count ~= 0 then call('DEL', FREE) end
    free_count, top = 0, 0
    call('HSET', META, 'slots', '0')
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
  call('ZREMRANGEBYSCORE', TIME, '-inf', cutoff)
  call('ZINTERSTORE', OWNER, 2, OWNER, TIME, 'WEIGHTS', 1, 0)
  call('ZINTERSTORE', TIME, 2, TIME, OWNER, 'WEIGHTS', 1, 0)
  for i = 1, #expired, 500 do  -- unpack() has a stack limit
    local fields = {}
    for j = i, math.min(i + 499, #expired) do
      fields[#fields + 1] = expired[j]
      fields[#fields + 1] = UNITS .. expired[j]
    end
    call('HDEL', INFO, unpack(fields))
  end
  count = call('ZCARD', OWNER)
  if call('HLEN', INFO) > count then
    -- Fields of ids no longer queued (a waiter's {units} field counts too, hence the check
    -- of each field whenever a waiter asks for more than one unit: rare in this pass).
    for _, field in ipairs(call('HKEYS', INFO)) do
      local id = field
      if string.sub(field, 1, #UNITS) == UNITS then id = string.sub(field, #UNITS + 1) end
      if not call('ZSCORE', OWNER, id) then call('HDEL', INFO, field) end
    end
  end
  return count, settle(promote(repair()))
end

-- Refusals come first, before anything is written.
if op == 'open' or op == 'status' or op == 'evict' or op == 'resize' then
  for _, i in ipairs({1, 2, 3, 4, 5, 8, 9}) do
    local actual = call('TYPE', KEYS[i])['ok']
    if actual ~= 'none' and actual ~= WANTED[i] then return {-2, KEYS[i], actual, WANTED[i]} end
  end
end
if op == 'open' then
  local counter = call('GET', COUNTER)
  if counter and not string.match(counter, '^%-?%d+$') then return {-3, COUNTER} end
end
local meta, refused = guarded(4, 'HMGET', 'limit', 'slots')
if refused then return refused end
local stored = meta[1]
-- A stored limit is a whole number from 1 up; anything else is refused, never followed.
if stored then
  local n = tonumber(stored)
  if not n or n < 1 or n ~= math.floor(n) then return {-1, stored} end
end
if limit == 0 then
  if op ~= 'status' and op ~= 'evict' and op ~= 'resize' then
    return redis.error_reply('fairsem semaphore script: limit 0 is only for status, evict and resize')
  end
  limit = tonumber(stored or '0')
elseif not stored then
  if op == 'open' or op == 'acquire' then call('HSET', META, 'limit', int(limit)) end
elseif tonumber(stored) ~= limit then
  -- A client opening with another limit is told; one that opened before a resize follows it.
  if op == 'open' then return {-1, stored} end
  limit = tonumber(stored)
end
top = tonumber(meta[2] or '0') or 0
local held
if op ~= 'open' and op ~= 'status' and op ~= 'evict' and op ~= 'resize' then
  local bad
  held, bad = guarded(8, 'HLEN')
  if bad then return bad end
  free_count, bad = guarded(9, 'ZCARD')
  if bad then return bad end
end
if limit > 0 and (not meta[2] or not stored) then
  -- The slot bookkeeping starts on first use, and again should meta have been lost: existing
  -- holders keep their slots, and the members a semaphore of an earlier version counted as
  -- holders are given slots by the promotion that follows (not for resize, which promotes
  -- under its new limit).
  held = repair()
  if op ~= 'resize' then held = promote(held) end
else
  if not held then held = call('HLEN', SLOTS) end
  -- settle() puts meta's `slots` back to 0 whenever the last holder leaves, so nobody holding
  -- with slots handed out means the slots hash was deleted behind the semaphore's back. Who has
  -- which slot is then unknown: every entry is dropped (holders learn at their next renewal
  -- that their permits are lost; waiters queue again) rather than a slot handed out twice.
  if limit > 0 and held == 0 and top ~= 0 then
    local bad = forget_everyone()
    if bad then return bad end
  end
end
-- Open's work is done: the limit stored or checked, and the bookkeeping set up (promoting
-- under it) on first use.
if op == 'open' then return {1} end

if op == 'release' then
  local id, ticket, receipt_ms, how = ARGV[4], tonumber(ARGV[5]), ARGV[6], ARGV[7]
  local score, bad = guarded(1, 'ZSCORE', id)
  if bad then return bad end
  if not score or (ticket ~= 0 and tonumber(score) ~= ticket) then
    -- Gone, or the id now names a later permit: released by an earlier run of this call
    -- whose reply was lost (its receipt says so), or expired.
    if ticket ~= 0 and tonumber(pcall_redis('GET', RELEASED .. id)) == ticket then return {3} end
    return {0}
  end
  if how == 'keep' then
    -- A holder giving back all but its K lowest slots: done already when it holds no more
    -- (this call run again after a lost reply).
    local stored_slots = call('HGET', SLOTS, id)
    if not stored_slots then return {0} end
    local slots = split(stored_slots) or {}
    local keep = tonumber(ARGV[8])
    if #slots <= keep then return {1} end
    table.sort(slots, by_number)
    local given = {}
    while #slots > keep do given[#given + 1] = table.remove(slots) end
    call('HSET', SLOTS, id, table.concat(slots, ','))
    pass_on(held, given)
    return {1}
  end
  -- The first write: info's type is checked by it.
  bad = select(2, guarded(5, 'HDEL', id, UNITS .. id))
  if bad then return bad end
  -- Should time be foreign, the entry's owner info is all this run has changed.
  bad = select(2, guarded(2, 'ZREM', id))
  if bad then return bad end
  call('ZREM', OWNER, id)
  local stored_slots = call('HGET', SLOTS, id)
  -- A waiter leaving (TICKET 0 or "leaving", also one giving up just after its promotion)
  -- may have a wake-up in its list; a holder's list is empty (it popped its wake-up, or its
  -- own call cleared the list).
  if not stored_slots or ticket == 0 or how == 'leaving' then call('DEL', WAKE .. id) end
  if not stored_slots then return {2} end
  call('HDEL', SLOTS, id)
  -- A receipt, so that a retry after a lost reply can tell "released" from "expired".
  call('SET', RELEASED .. id, score, 'PX', receipt_ms)
  pass_on(held - 1, split(stored_slots) or {})
  return {1}
end

local t = call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = now + lease

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

if op == 'acquire' then
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
end

if op == 'resize' then
  local old, new = limit, tonumber(ARGV[4])
  if not new or new < 1 or new ~= math.floor(new) then
    return redis.error_reply('fairsem semaphore script: resize needs a limit of at least 1')
  end
  call('HSET', META, 'limit', int(new))
  limit = new
  -- A larger limit makes more slots free; after a smaller one, the slots held above it go
  -- back to free when their holders leave. The reap that follows promotes under the new
  -- limit only.
  local count, after = reap(now, true, repair())
  if not count then return after end
  settle(after)
  return {old, new, promoted_count}
end

do
  local count, bad = reap(now, true, held)
  if not count then return bad end
  held = bad
end

if op == 'renew' then
  local reply = {now, deadline}
  local pairs_to_set = {}
  -- Holders are the members up to the held-th ticket: one ZSCORE per permit tells a holder,
  -- and only a waiter needs its rank.
  local last_holder = -1
  if held > 0 then
    last_holder = tonumber(call('ZRANGE', OWNER, int(held - 1), int(held - 1), 'WITHSCORES')[2])
  end
  for i = 4, #ARGV, 2 do
    local id, ticket = ARGV[i], tonumber(ARGV[i + 1])
    local score = call('ZSCORE', OWNER, id)
    if score and tonumber(score) == ticket then
      pairs_to_set[#pairs_to_set + 1] = int(deadline)
      pairs_to_set[#pairs_to_set + 1] = id
      if ticket <= last_holder then
        reply[#reply + 1] = 1
      else
        reply[#reply + 1] = call('ZRANK', OWNER, id) - held + 2
      end
    elseif pcall_redis('LINDEX', WAKE .. id, '0') == 'evicted' then
      reply[#reply + 1] = -1
    else
      reply[#reply + 1] = 0
    end
  end
  for i = 1, #pairs_to_set, 1000 do  -- unpack() has a stack limit
    call('ZADD', TIME, unpack(pairs_to_set, i, math.min(i + 999, #pairs_to_set)))
  end
  return reply
end

if op == 'status' then
  local reply = {now, limit, tonumber(call('GET', COUNTER) or '0') or -1}
  local members = call('ZRANGE', OWNER, '0', '-1', 'WITHSCORES')
  for i = 1, #members, 2 do
    local id = members[i]
    local info = call('HMGET', INFO, id, UNITS .. id)
    local stored_slots = call('HGET', SLOTS, id)
    local units = tonumber(info[2] or '1') or 1
    if stored_slots then units = #(split(stored_slots) or {}) end
    reply[#reply + 1] = id
    reply[#reply + 1] = tonumber(members[i + 1])
    reply[#reply + 1] = tonumber(call('ZSCORE', TIME, id) or '0')
    reply[#reply + 1] = info[1] or ''
    reply[#reply + 1] = units
    reply[#reply + 1] = stored_slots or ''
  end
  return reply
end

if op == 'evict' then
  local id = ARGV[4]
  local list = WAKE .. id
  if not call('ZSCORE', OWNER, id) then
    -- Evicted already: by an earlier run of this call whose reply was lost, or by another.
    if pcall_redis('LINDEX', list, '0') == 'evicted' then return {3} end
    return {0}
  end
  local left = tonumber(call('ZSCORE', TIME, id) or now) - now
  local stored_slots = call('HGET', SLOTS, id)
  -- Kept until the holder's next renewal (due before its deadline) has surely seen it.
  remove_entry(id, 'evicted', math.max(left, 0) + lease)
  if not stored_slots then return {2} end
  call('HDEL', SLOTS, id)
  if limit > 0 then pass_on(held - 1, split(stored_slots) or {}) end
  return {1}
end

return redis.error_reply('fairsem semaphore script: unknown operation ' .. tostring(op))
