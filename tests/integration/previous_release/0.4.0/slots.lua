-- slots: the slot bookkeeping of a semaphore (part of every operation's script, after
-- common.lua). A holder of n units has n slots; every slot below meta's `slots` (top) is a
-- holder's or in free, so the units held are top minus the size of free.

-- Its state (free_count, top) is declared with the rest of a run's state in common.lua.

-- The units held: every slot below top that is not free.
local function used()
  if not free_count then free_count = call('ZCARD', FREE) end
  return top - free_count
end

-- Puts slots back into free.
local function give_back(slots)
  local was_empty = free_count == nil or free_count == 0
  local pairs_to_add = {}
  for _, slot in ipairs(slots) do
    pairs_to_add[#pairs_to_add + 1] = slot
    pairs_to_add[#pairs_to_add + 1] = slot
  end
  for i = 1, #pairs_to_add, 1000 do  -- unpack() has a stack limit
    call('ZADD', FREE, unpack(pairs_to_add, i, math.min(i + 999, #pairs_to_add)))
  end
  if free_count then free_count = free_count + #pairs_to_add / 2 end
  if was_empty and #slots > 0 then born(9) end
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
    -- Demoted: a wake-up pushed with the slots it had must not be taken as a grant. (One its
    -- Client's inbox holds, or its waker popped already, may be: the waiter's next renewal finds
    -- it waiting, not holding, and the permit is lost. This only follows an edit of the keys
    -- behind the semaphore's back.)
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
    if top < limit then
      top = top + 1
      call('HSET', META, 'slots', int(top))
      return int(top - 1)
    end
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
