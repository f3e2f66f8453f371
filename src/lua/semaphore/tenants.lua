-- tenants: fair shares between tenants on one semaphore (part of every operation's script, after
-- common.lua): data model 3.
--
-- A request may name a tenant (acquire's TENANT; empty: the default tenant). The first request
-- that names one, or the first weight stored (tenant.lua), upgrades the semaphore in place to
-- data model 3 (meta's `model` 3, `model_by` this version), which clients of 0.4 and earlier
-- refuse ({-7}) rather than queue in ways they cannot read. A semaphore whose requests never name
-- a tenant stays in data model 2 and never runs the code below.
--
-- In data model 3, owner, time, info and slots keep every entry as before (a waiter is still a
-- member of owner with its ticket), and these keys order the waiters:
--   OWNER:queue:TENANT  ZSET  the tenant's waiters, member = id, score = ticket (FIFO within it)
--   OWNER:tenants       ZSET  one member per tenant with waiters, HEAD:TENANT (HEAD: its first
--                             waiter's ticket, 16 digits, so equal scores sort by ticket), score =
--                             the tenant's virtual time
--   OWNER:idle          ZSET  member = tenant, score = the virtual time it had when its last
--                             waiter was granted (kept only while above the semaphore's)
--   META:weights        HASH  tenant -> weight, for the tenants whose weight is not 1
-- and meta's `vtime`, the semaphore's virtual time: that of the tenant chosen last.
--
-- Grant order (promote() in queue.lua): weighted fair queuing by units. The next waiter granted
-- is the first one of the tenant with the smallest virtual time (ties: the earlier ticket); a
-- grant of n units moves that tenant's virtual time on by n / weight and the semaphore's to the
-- tenant's before the grant. A tenant whose first waiter arrives starts at the larger of the
-- semaphore's virtual time and the one it had when it last went idle, so time spent idle is
-- not saved up, and a tenant that empties its queue between grants gains nothing. When the
-- chosen tenant's first waiter asks for more units than are free, nobody is promoted (no
-- tenant, and no request within one, passes it). A promoted waiter gets a new ticket (an INCR
-- of the counter), so fencing tokens still rise strictly in grant order; info's {was}ID keeps
-- the ticket it waited under, so that a waiter leaving in the instant of its promotion frees
-- the permit. Each grant costs O(log tenants + log waiters).
--
-- Waiters leave their tenant's queue wherever they leave owner (remove_entry(), a reap, a
-- release); the queues are also read defensively: an id found at a queue's head that is no
-- longer a waiter there (keys edited behind the semaphore's back) is dropped when met.

-- A tenant's queue of waiters.
local function queue_of(tenant) return OWNER .. ':queue:' .. tenant end
-- The ZSET of tenants that went idle above the semaphore's virtual time.
local function idle_key() return OWNER .. ':idle' end
-- The member of OWNER:tenants for `tenant` whose first waiter has `ticket`, and back.
local function tenant_member(ticket, tenant) return string.format('%016d', ticket) .. ':' .. tenant end
local function member_tenant(member) return string.sub(member, 18) end
-- A virtual time as Redis keeps it exactly (a ZSET score is a double).
local function vnum(x) return string.format('%.17g', x) end

-- The weight of `tenant`: 1 unless stored.
local function weight_of(tenant)
  return tonumber(call('HGET', WEIGHTS, tenant) or '1') or 1
end

-- The member of OWNER:tenants for `tenant`'s queue as it is (nil: nobody waits).
local function head_member(tenant)
  local head = call('ZRANGE', queue_of(tenant), '0', '0', 'WITHSCORES')
  if not head[1] then return nil end
  return tenant_member(tonumber(head[2]), tenant)
end

-- After `tenant`'s queue changed (its member was `before`, nil when nobody waited): moves its
-- place among the tenants to its new first waiter, keeping its virtual time (one that becomes
-- active starts at the semaphore's, or above, see Grant order).
local function replace_tenant(tenant, before)
  local after = head_member(tenant)
  if after == before then return end
  local vt = before and tonumber(call('ZSCORE', TENANTS, before) or '')
  if before then call('ZREM', TENANTS, before) end
  if not after then return end
  if not vt then
    vt = math.max(vtime, tonumber(call('ZSCORE', idle_key(), tenant) or '0') or 0)
    call('ZREM', idle_key(), tenant)
    born(queue_of(tenant))
  end
  call('ZADD', TENANTS, vnum(vt), after)
  born(TENANTS)
end

-- Queues waiter `id` with `ticket` for `tenant` (a new waiter, whose ticket is the newest, or
-- one put back in the queue).
local function fair_enqueue(id, ticket, tenant)
  local before = head_member(tenant)
  call('ZADD', queue_of(tenant), int(ticket), id)
  replace_tenant(tenant, before)
end

-- Takes waiter `id` out of `tenant`'s queue (nothing if it is not there).
local function fair_unqueue(id, tenant)
  local queue = queue_of(tenant or '')
  local head = call('ZRANGE', queue, '0', '0')
  if head[1] ~= id then
    call('ZREM', queue, id)
    return
  end
  local before = head_member(tenant or '')
  call('ZREM', queue, id)
  replace_tenant(tenant or '', before)
end

-- The waiter to be granted next: its tenant, id, ticket, the tenant's virtual time and member
-- of OWNER:tenants; nil when nobody waits.
local function fair_next()
  while true do
    local first = call('ZRANGE', TENANTS, '0', '0', 'WITHSCORES')
    if not first[1] then return nil end
    local member, vt = first[1], tonumber(first[2])
    local tenant = member_tenant(member)
    local head = call('ZRANGE', queue_of(tenant), '0', '0', 'WITHSCORES')
    if not head[1] then
      call('ZREM', TENANTS, member)
    else
      local id, ticket = head[1], tonumber(head[2])
      local score = call('ZSCORE', OWNER, id)
      if score and tonumber(score) == ticket and call('HEXISTS', SLOTS, id) == 0 then
        local now_member = tenant_member(ticket, tenant)
        if now_member ~= member then
          call('ZREM', TENANTS, member)
          call('ZADD', TENANTS, vnum(vt), now_member)
        end
        return tenant, id, ticket, vt, now_member
      end
      call('ZREM', queue_of(tenant), id)  -- no longer waiting here: met on the way
    end
  end
end

-- After the grant of `units` to the first waiter of `tenant` (chosen at virtual time `vt`, with
-- `member`), which has left the tenant's queue: the tenant's virtual time moves on, and the
-- semaphore's to `vt`.
local function fair_granted(tenant, member, vt, units)
  vtime = vt
  call('HSET', META, 'vtime', vnum(vt))
  call('ZREM', TENANTS, member)
  local after = head_member(tenant)
  local next_vt = vt + units / weight_of(tenant)
  if after then
    -- The ZREM above deleted OWNER:tenants when this was its only member: made again, it
    -- expires with the others (born()), else it would outlive an idle expiry.
    call('ZADD', TENANTS, vnum(next_vt), after)
    born(TENANTS)
  else
    -- Idle now: remembered while above the semaphore's virtual time (see Grant order).
    call('ZADD', idle_key(), vnum(next_vt), tenant)
    born(idle_key())
  end
  -- Tenants idle at or below it start at the semaphore's virtual time anyway.
  call('ZREMRANGEBYSCORE', idle_key(), '-inf', vnum(vt))
end

-- Every waiter of data model 3, tenant by tenant.
local function fair_waiters()
  local waiters = {}
  for _, member in ipairs(call('ZRANGE', TENANTS, '0', '-1')) do
    for _, id in ipairs(call('ZRANGE', queue_of(member_tenant(member)), '0', '-1')) do
      waiters[#waiters + 1] = id
    end
  end
  return waiters
end

-- Where waiter `id` of `tenant` stands in its tenant's queue (1: first), nil if not there.
local function fair_position(id, tenant)
  local rank = call('ZRANK', queue_of(tenant or ''), id)
  return rank and rank + 1
end

-- Drops the tenants' queues (see forget_everyone()); the weights stay.
local function fair_forget()
  for _, member in ipairs(call('ZRANGE', TENANTS, '0', '-1')) do
    call('DEL', queue_of(member_tenant(member)))
  end
  call('DEL', TENANTS, idle_key())
end

-- Upgrades the semaphore to data model 3: the waiters queued so far (the members of owner after
-- the first `held`, data model 2) become the default tenant's queue.
local function upgrade_to_fair(held)
  call('HSET', META, 'model', int(FAIR_MODEL), 'model_by', MODEL_BY)
  fair = true
  fair_keys()
  local waiters = call('ZRANGE', OWNER, int(held), '-1', 'WITHSCORES')
  if #waiters == 0 then return end
  local queue, pairs_to_add = queue_of(''), {}
  for i = 1, #waiters, 2 do
    pairs_to_add[#pairs_to_add + 1] = waiters[i + 1]
    pairs_to_add[#pairs_to_add + 1] = waiters[i]
  end
  for i = 1, #pairs_to_add, 1000 do  -- unpack() has a stack limit
    call('ZADD', queue, unpack(pairs_to_add, i, math.min(i + 999, #pairs_to_add)))
  end
  replace_tenant('', nil)
end
