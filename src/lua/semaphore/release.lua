-- release: frees a holder's permit (its slots pass to the waiters that lets in; a receipt
-- lets a retry after a lost reply tell "released" from "expired"), removes a waiter that gives
-- up ("leaving"; the waiters behind it that fit then are promoted), or gives back all but a
-- holder's K lowest slots ("keep K").
--   ARGV: release LIMIT LEASE_MS ID TICKET RECEIPT_MS [leaving | keep K]
--   RECEIPT_MS: how long the receipt of a holder's release is kept (see Receipts in common.lua);
--   every run of one release (a retry after a lost reply) passes the same.
--   Reply {state}: 1 a holder released (or, with keep, holds at most K units), 2 a waiter left,
--   0 not present, 3 released by an earlier run.
--
-- Its function may run when Redis is out of memory (maxmemory): a holder can always give its
-- permit back.
-- function flags: allow-oom

local id, ticket, receipt_ms, how = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6] or ''), ARGV[7]
-- Checked before anything is written: a garbled TICKET would be told "gone", a garbled
-- RECEIPT_MS would keep a receipt that is stale at once.
if not ticket or ticket % 1 ~= 0 or not receipt_ms or receipt_ms < 0 or receipt_ms % 1 ~= 0
    or receipt_ms > MAX_RECEIPT_MS then
  return redis.error_reply('fairsem semaphore script: release needs TICKET (an integer) and '
    .. 'RECEIPT_MS (whole ms, 0 to ' .. int(MAX_RECEIPT_MS) .. ')')
end
local meta, refused = read_meta()
if refused then return refused end
-- A release of a semaphore in this data model, whose limit is stored as the caller passed it and
-- whose slot bookkeeping is set up, leaves prepare() nothing to do but set the run's state: it
-- reads its entry first, and the last holder out (the release of an uncontended pair) leaves
-- without prepare(), the counts of the slot keys or the helpers the others need (see the
-- uncontended path in acquire.lua).
local ready = not meta[5] and meta[1] == ARGV[2] and limit_in(meta[1])
  and tonumber(meta[2] or '')
if not ready then
  refused = prepare('release', nil, meta)
  if refused then return refused end
end
local score = pcall_redis('ZSCORE', OWNER, id)
if type(score) == 'table' then return refusal(1, score) end
if fair and score and ticket ~= 0 and tonumber(score) ~= ticket and how == 'leaving'
    and tonumber(pcall_redis('HGET', INFO, WAS .. id)) == ticket then
  -- A waiter leaving in the instant of its promotion, under the ticket it waited with
  -- (tenants.lua): the permit it was given passes on.
  ticket = tonumber(score)
end
if not score or (ticket ~= 0 and tonumber(score) ~= ticket) then
  -- Gone, or the id now names a later permit: released by an earlier run of this call
  -- whose reply was lost (its receipt says so), or expired.
  if ticket ~= 0 and was_released(id, ticket, receipt_ms) then return {3} end
  return {0}
end
-- slots' first access, guarded; a waiter has none.
local stored_slots = pcall_redis('HGET', SLOTS, id)
if type(stored_slots) == 'table' then return refusal(8, stored_slots) end
-- time's first access, guarded, before anything is written.
local deadline = pcall_redis('ZSCORE', TIME, id)
if type(deadline) == 'table' then return refusal(2, deadline) end
local mine = stored_slots and split(stored_slots)
-- The last one out: a holder of every slot handed out (so nobody else holds and none is free),
-- with nobody waiting. Then the slot keys need no counting: the bookkeeping starts over.
local last = how ~= 'keep' and mine and #mine == (ready and tonumber(meta[2]) or top)
  and call('ZCARD', OWNER) == 1
if last then
  -- The first write: info's type is checked by it.
  -- (Data model 3's fields only there: the last holder of data model 2 runs without prepare().)
  local removed
  if fair then
    removed = pcall_redis('HDEL', INFO, id, UNITS .. id, INBOX .. id, QUEUED .. id, TENANT .. id,
      WAS .. id)
  else
    removed = pcall_redis('HDEL', INFO, id, UNITS .. id, INBOX .. id, QUEUED .. id)
  end
  if type(removed) == 'table' then return refusal(5, removed) end
  keep_receipt(id, score, receipt_ms)
  -- A holder giving up just after its promotion may have its wake-up in its list.
  if ticket == 0 or how == 'leaving' then call('DEL', WAKE .. id) end
  -- The only entry, holding every slot: owner, time and slots hold nothing else, and info
  -- nothing but fields that a client of 0.3.1 left when it removed an entry of this version
  -- (it knows no {queued} field), which go too. Nothing is free: the bookkeeping starts over
  -- (what settle(0) does).
  call('DEL', OWNER, TIME, SLOTS, INFO)
  call('HSET', META, 'slots', '0')
  return {1}
end
if ready then
  refused = prepare('release', nil, meta)
  if refused then return refused end
end
local forgot, bad = count_slots()
if bad then return bad end
if forgot then return {0} end
if how == 'keep' then
  -- A holder giving back all but its K lowest slots: done already when it holds no more
  -- (this call run again after a lost reply).
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
-- A waiter's tenant, for its queue (tenants.lua).
local tenant = fair and not stored_slots and pcall_redis('HGET', INFO, TENANT .. id)
-- The first write: info's type is checked by it.
if fair then
  bad = select(2, guarded(5, 'HDEL', id, UNITS .. id, INBOX .. id, QUEUED .. id, TENANT .. id,
    WAS .. id))
else
  bad = select(2, guarded(5, 'HDEL', id, UNITS .. id, INBOX .. id, QUEUED .. id))
end
if bad then return bad end
-- A holder's receipt, before its entry goes (see keep_receipt).
if stored_slots then keep_receipt(id, score, receipt_ms) end
-- A waiter leaving (TICKET 0 or "leaving", also one giving up just after its promotion)
-- may have a wake-up in its list; a holder's list is empty (it popped its wake-up, or its
-- own call cleared the list).
if not stored_slots or ticket == 0 or how == 'leaving' then call('DEL', WAKE .. id) end
call('ZREM', TIME, id)
call('ZREM', OWNER, id)
if fair and not stored_slots then fair_unqueue(id, tenant) end
if not stored_slots then
  -- A waiter left: if it was the head, the waiters behind it may fit now (see Holders and
  -- slots in common.lua).
  promote(held)
  return {2}
end
call('HDEL', SLOTS, id)
pass_on(held - 1, mine or {})
return {1}
