-- release: frees a holder's permit (its slots pass to the waiters that lets in; a receipt
-- lets a retry after a lost reply tell "released" from "expired"), removes a waiter that gives
-- up ("leaving"), or gives back all but a holder's K lowest slots ("keep K").
--   ARGV: release LIMIT LEASE_MS ID TICKET RECEIPT_MS [leaving | keep K]
--   Reply {state}: 1 a holder released (or, with keep, holds at most K units), 2 a waiter left,
--   0 not present, 3 released by an earlier run.
--
-- Its function may run when Redis is out of memory (maxmemory): a holder can always give its
-- permit back.
-- function flags: allow-oom

local refused = prepare('release')
if refused then return refused end

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
