-- evict: removes a holder or a waiter on an operator's request, leaving the marker EVICTED in
-- its wake list for it to find; a holder's slots pass on, and the waiters that either removal
-- lets in are promoted.
--   ARGV: evict LIMIT LEASE_MS ID (LIMIT 0: whatever is stored)
--   Reply {state}: 1 a holder removed, 2 a waiter removed, 0 not present, 3 evicted already.
--
-- Its function may run when Redis is out of memory (maxmemory): an operator can still evict.
-- function flags: allow-oom

local refused, now, deadline = prepare_and_reap('evict')
if refused then return refused end

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
if not stored_slots then
  -- A waiter removed: if it was the head, the waiters behind it may fit now.
  if limit > 0 then promote(held) end
  return {2}
end
call('HDEL', SLOTS, id)
if limit > 0 then pass_on(held - 1, split(stored_slots) or {}) end
return {1}
