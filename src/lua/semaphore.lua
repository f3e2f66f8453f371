-- semaphore: every operation on one fair, lease-based counting semaphore, each one atomic.
--
-- KEYS (all share the hash tag {NAME}, so one semaphore lives in one cluster slot):
--   1 P:{NAME}:owner    ZSET  member = permit id, score = ticket (holders and waiters)
--   2 P:{NAME}:time     ZSET  member = permit id, score = lease deadline, ms of this server's clock
--   3 P:{NAME}:counter  STRING ticket counter (INCR only; a ticket is the fencing token)
--   4 P:{NAME}:meta     HASH  limit = the limit set by the semaphore's first user
--   5 P:{NAME}:info     HASH  permit id -> owner info (who holds or waits)
--   6 P:{NAME}:wake:    prefix of the per-waiter wake lists (LIST P:{NAME}:wake:ID)
--   7 P:{NAME}:released: prefix of release receipts (STRING P:{NAME}:released:ID, one lease)
--
-- ARGV: 1 operation, 2 limit, 3 lease in ms, then per operation:
--   open                          check key types and the limit; store the limit if unset
--   acquire  ID MODE OWNER_INFO [TICKET]
--                                 MODE "try" (never queues) or "queue"; TICKET: the ticket a
--                                 waiter polling again already has (0 or absent: none yet)
--   release  ID TICKET RECEIPT_MS [leaving]
--                                 TICKET 0: whatever entry ID has; "leaving": a waiter giving up
--                                 (either clears its wake list)
--   renew    ID TICKET ...        one call renews every permit of a process
--   status
--   evict    ID                   remove ID (holder or waiter) on an operator's request
-- Limit 0 ("whatever is stored") is accepted by status and evict only, for tools that do not
-- know the limit; with no limit stored they neither reap nor wake.
--
-- A permit is ID *and* TICKET: release and renew act only on the entry with that ticket, so a
-- holder whose entry expired can never touch a later permit that reuses its id.
--
-- Eviction leaves the marker EVICTED as the only element of the evicted id's wake list, so the
-- waiter blocked on it, a waiter polling with its TICKET, and a holder's next renewal can each
-- tell "evicted" from "expired". A new entry for the id clears the list first.
--
-- A member of owner is a holder iff its rank < limit; the others wait in ticket order.
-- Reaping removes members whose deadline has passed and wakes exactly the waiters their
-- removal promoted, through their own wake lists. It runs wherever someone could be kept
-- waiting by an expired member: an acquire that finds every permit taken, a waiter's poll,
-- renew, status and evict (an acquire below the limit and a release need not). "Passed" is
-- strict: the clock is read in whole milliseconds (rounded down), so a deadline equal to now
-- may still be up to 1 ms ahead; reaping it would end a lease before the client's own estimate.
--
-- Cost: each redis.call costs about a microsecond, and each function the script defines is
-- built again on every run, so the hot operations (acquire, release) make as few calls as
-- they can and the script defines few functions. Key types: open, status and evict check all
-- five keys with TYPE; acquire, release and renew make their first access to each key through
-- guarded(), a read or a first write whose WRONGTYPE error becomes a refusal (undoing the
-- writes before it), so a foreign key is never written to.
--
-- Replies are arrays. A negative first element is a refusal and nothing was written (but for
-- maintenance a refused call may have done first: storing the limit on first use, reaping;
-- and a release that finds time foreign has already removed the entry's owner info):
--   {-1, stored_limit}                    the semaphore was created with another limit
--   {-2, key, actual_type, wanted_type}   a key under the prefix belongs to something else
--   {-3, key}                             the counter is not an integer
-- Otherwise:
--   open     {1}
--   acquire  {state, ticket, deadline, position, now}   state 1 granted, 2 queued, 0 full,
--                                         3 the polling waiter was evicted
--   release  {state}                      1 a holder released, 2 a waiter left, 0 not present,
--                                         3 this permit was released by an earlier run
--   renew    {now, deadline, r...}        per id: 1 holder, 0 lost, -1 evicted,
--                                         k >= 2 waiting at k - 1
--   status   {now, limit, counter, id, ticket, deadline, info, ...}  in ticket order
--   evict    {state}                      1 a holder removed, 2 a waiter removed, 0 not present,
--                                         3 evicted already (its marker is still there)
--
-- Every operation is idempotent for a given permit id, so a client may repeat one whose reply
-- was lost. Runs on its own: redis-cli --eval src/lua/semaphore.lua o t c m i w: r: , status 1 1000

local OWNER, TIME, COUNTER, META, INFO, WAKE = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local RELEASED = KEYS[7]
local op, limit, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local call, pcall_redis = redis.call, redis.pcall

-- Runs a command on KEYS[i]. Returns its reply, or nil and refusal -2 naming the key when the
-- key has the wrong type (callers return the refusal, undoing their earlier writes first).
local function guarded(i, command, ...)
  local r = redis.pcall(command, KEYS[i], ...)
  if type(r) == 'table' and r.err then
    if string.find(r.err, 'WRONGTYPE', 1, true) then
      local wanted = ({'zset', 'zset', 'string', 'hash', 'hash'})[i]
      return nil, {-2, KEYS[i], redis.call('TYPE', KEYS[i])['ok'], wanted}
    end
    return error(r)  -- any other error ends the script as it is
  end
  return r
end

-- Numbers go to Redis as integer strings: Lua would format large ones with an exponent.
local function int(n) return string.format('%d', n) end

-- Removes expired members (all of them at once, rebuilding owner and time as their
-- intersection, when `rebuild` or when many expired) and wakes exactly the promoted waiters.
-- `check`: first compare the sizes of owner and time, and rebuild when they differ (a key was
-- deleted or edited behind the semaphore's back). Returns owner's size afterwards.
local function reap(now, check, limit, lease)
  if limit == 0 then return 0 end  -- a tool's read with no stored limit: holders are unknown
  local count, bad = guarded(1, 'ZCARD')
  if bad then return nil, bad end
  local rebuild = false
  if check then
    local timed
    timed, bad = guarded(2, 'ZCARD')
    if bad then return nil, bad end
    rebuild = count ~= timed
  end
  local cutoff = '(' .. int(now)  -- deadlines strictly before now
  if not rebuild then
    local first
    first, bad = guarded(2, 'ZRANGEBYSCORE', '-inf', cutoff, 'LIMIT', '0', '1')
    if bad then return nil, bad end
    if #first == 0 then return count end
  end
  local function wake(ids)
    for _, id in ipairs(ids) do
      -- A foreign key in the way only costs that waiter its wake-up: it polls.
      if type(redis.pcall('LPUSH', KEYS[6] .. id, '1')) == 'number' then
        -- A waiter polls at least every lease/3: a list nobody pops is gone after one lease.
        redis.call('PEXPIRE', KEYS[6] .. id, int(lease))
      end
    end
  end
  local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', cutoff)
  if not rebuild and #expired <= 64 then
    -- A few: one by one, O(log N) each.
    local holders_gone = 0
    for _, id in ipairs(expired) do
      local rank = redis.call('ZRANK', KEYS[1], id)
      if rank and rank < limit then holders_gone = holders_gone + 1 end
    end
    -- The first write: info's type is checked by it.
    bad = select(2, guarded(5, 'HDEL', unpack(expired)))
    if bad then return nil, bad end
    redis.call('ZREM', KEYS[2], unpack(expired))
    count = count - redis.call('ZREM', KEYS[1], unpack(expired))
    -- k holders left: the waiters now at ranks limit-k .. limit-1 were just promoted.
    if holders_gone > 0 then
      wake(redis.call('ZRANGE', KEYS[1], int(limit - holders_gone), int(limit - 1)))
    end
    return count
  end
  -- Many, or a rebuild: one O(N) pass. WEIGHTS 1 0 keeps each set's own scores (tickets in
  -- owner, deadlines in time).
  local before = redis.call('ZRANGE', KEYS[1], '0', int(limit - 1))
  bad = select(2, guarded(5, 'HLEN'))
  if bad then return nil, bad end
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', cutoff)
  redis.call('ZINTERSTORE', KEYS[1], 2, KEYS[1], KEYS[2], 'WEIGHTS', 1, 0)
  redis.call('ZINTERSTORE', KEYS[2], 2, KEYS[2], KEYS[1], 'WEIGHTS', 1, 0)
  for i = 1, #expired, 1000 do  -- unpack() has a stack limit
    redis.call('HDEL', KEYS[5], unpack(expired, i, math.min(i + 999, #expired)))
  end
  count = redis.call('ZCARD', KEYS[1])
  if redis.call('HLEN', KEYS[5]) > count then
    for _, id in ipairs(redis.call('HKEYS', KEYS[5])) do
      if not redis.call('ZSCORE', KEYS[1], id) then redis.call('HDEL', KEYS[5], id) end
    end
  end
  local was_holder = {}
  for _, id in ipairs(before) do was_holder[id] = true end
  local promoted = {}
  for _, id in ipairs(redis.call('ZRANGE', KEYS[1], '0', int(limit - 1))) do
    if not was_holder[id] then promoted[#promoted + 1] = id end
  end
  wake(promoted)
  return count
end

-- Refusals come first, before anything is written.
if op == 'open' or op == 'status' or op == 'evict' then
  local wanted = {'zset', 'zset', 'string', 'hash', 'hash'}
  for i = 1, 5 do
    local actual = call('TYPE', KEYS[i])['ok']
    if actual ~= 'none' and actual ~= wanted[i] then return {-2, KEYS[i], actual, wanted[i]} end
  end
end
if op == 'open' then
  local counter = call('GET', COUNTER)
  if counter and not string.match(counter, '^%-?%d+$') then return {-3, COUNTER} end
end
local stored, refused = guarded(4, 'HGET', 'limit')
if refused then return refused end
if limit == 0 then
  if op ~= 'status' and op ~= 'evict' then
    return redis.error_reply('fairsem semaphore script: limit 0 is only for status and evict')
  end
  if stored and not tonumber(stored) then return {-1, stored} end
  limit = tonumber(stored or '0')
elseif not stored then
  if op == 'open' or op == 'acquire' then call('HSET', META, 'limit', int(limit)) end
elseif tonumber(stored) ~= limit then
  return {-1, stored}
end
if op == 'open' then return {1} end

if op == 'release' then
  local id, ticket, receipt_ms = ARGV[4], tonumber(ARGV[5]), ARGV[6]
  local score, bad = guarded(1, 'ZSCORE', id)
  if bad then return bad end
  if not score or (ticket ~= 0 and tonumber(score) ~= ticket) then
    -- Gone, or the id now names a later permit: released by an earlier run of this call
    -- whose reply was lost (its receipt says so), or expired.
    if ticket ~= 0 and tonumber(pcall_redis('GET', RELEASED .. id)) == ticket then return {3} end
    return {0}
  end
  local rank = call('ZRANK', OWNER, id)
  bad = select(2, guarded(5, 'HDEL', id))  -- the first write: info's type is checked by it
  if bad then return bad end
  -- Should time be foreign, the entry's owner info is all this run has changed.
  bad = select(2, guarded(2, 'ZREM', id))
  if bad then return bad end
  call('ZREM', OWNER, id)
  -- A waiter leaving (TICKET 0 or "leaving", also one giving up just after its promotion)
  -- may have a wake-up in its list; a holder's list is empty (it popped its wake-up, or its
  -- own call cleared the list).
  if rank >= limit or ticket == 0 or ARGV[7] == 'leaving' then call('DEL', WAKE .. id) end
  if rank >= limit then return {2} end
  -- A receipt, so that a retry after a lost reply can tell "released" from "expired".
  call('SET', RELEASED .. id, score, 'PX', receipt_ms)
  -- One holder left: the waiter now at rank limit-1 (if any) was just promoted.
  local promoted = call('ZRANGE', OWNER, int(limit - 1), int(limit - 1))[1]
  if promoted and type(pcall_redis('LPUSH', WAKE .. promoted, '1')) == 'number' then
    call('PEXPIRE', WAKE .. promoted, int(lease))
  end
  return {1}
end

local t = call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = now + lease

if op == 'acquire' then
  local id, mode, owner_info = ARGV[4], ARGV[5], ARGV[6]
  local polling = tonumber(ARGV[7] or '0') ~= 0
  local ticket, bad = guarded(1, 'ZSCORE', id)
  if bad then return bad end
  if ticket then
    -- Already a member (a retry after a lost reply, a waiter polling, or a caller-chosen id
    -- acquired again): renew it and report where it stands.
    bad = select(2, reap(now, true, limit, lease))
    if bad then return bad end
    if call('ZSCORE', OWNER, id) then
      call('ZADD', TIME, int(deadline), id)
      local rank = call('ZRANK', OWNER, id)
      if rank < limit then
        call('DEL', WAKE .. id)
        return {1, tonumber(ticket), deadline, 0, now}
      end
      return {2, tonumber(ticket), deadline, rank - limit + 1, now}
    end
    -- Its own deadline had passed: it was reaped just now, and queues again below.
  elseif polling and pcall_redis('LINDEX', WAKE .. id, '0') == 'evicted' then
    -- A waiter polling with its ticket whose entry is gone: evicted, not expired.
    call('DEL', WAKE .. id)
    return {3, 0, 0, 0, now}
  end
  local count = call('ZCARD', OWNER)
  -- Someone would wait: first make sure no expired member (or lost key) is in the way.
  if count >= limit then
    count, bad = reap(now, true, limit, lease)
    if bad then return bad end
  end
  -- try never queues: when every permit is taken or anyone waits, it fails without writing.
  if mode == 'try' and count >= limit then return {0, 0, 0, 0, now} end
  -- Writes, each first one to its key guarded, the earlier ones undone on a refusal.
  bad = select(2, guarded(2, 'ZADD', int(deadline), id))
  if bad then return bad end
  bad = select(2, guarded(5, 'HSET', id, owner_info))
  if bad then
    call('ZREM', TIME, id)
    return bad
  end
  local counted = pcall_redis('INCR', COUNTER)
  if type(counted) == 'table' then
    call('ZREM', TIME, id)
    call('HDEL', INFO, id)
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
  -- Tickets only grow, so the new member is last: its rank is the old member count.
  if count < limit then return {1, ticket, deadline, 0, now} end
  return {2, ticket, deadline, count - limit + 1, now}
end

do
  local _, bad = reap(now, true, limit, lease)
  if bad then return bad end
end

if op == 'renew' then
  local reply = {now, deadline}
  local pairs_to_set = {}
  -- Holders are the members up to the limit-th ticket: one ZSCORE per permit tells a holder,
  -- and only a waiter needs its rank.
  local edge = call('ZRANGE', OWNER, int(limit - 1), int(limit - 1), 'WITHSCORES')[2]
  local last_holder = edge and tonumber(edge) or math.huge
  for i = 4, #ARGV, 2 do
    local id, ticket = ARGV[i], tonumber(ARGV[i + 1])
    local score = call('ZSCORE', OWNER, id)
    if score and tonumber(score) == ticket then
      pairs_to_set[#pairs_to_set + 1] = int(deadline)
      pairs_to_set[#pairs_to_set + 1] = id
      if ticket <= last_holder then
        reply[#reply + 1] = 1
      else
        reply[#reply + 1] = call('ZRANK', OWNER, id) - limit + 2
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
    reply[#reply + 1] = id
    reply[#reply + 1] = tonumber(members[i + 1])
    reply[#reply + 1] = tonumber(call('ZSCORE', TIME, id) or '0')
    reply[#reply + 1] = call('HGET', INFO, id) or ''
  end
  return reply
end

if op == 'evict' then
  local id = ARGV[4]
  local rank = call('ZRANK', OWNER, id)
  local list = WAKE .. id
  if not rank then
    -- Evicted already: by an earlier run of this call whose reply was lost, or by another.
    if pcall_redis('LINDEX', list, '0') == 'evicted' then return {3} end
    return {0}
  end
  local left = tonumber(call('ZSCORE', TIME, id) or now) - now
  call('ZREM', OWNER, id)
  call('ZREM', TIME, id)
  call('HDEL', INFO, id)
  call('DEL', list)
  call('LPUSH', list, 'evicted')
  -- Kept until the holder's next renewal (due before its deadline) has surely seen it.
  call('PEXPIRE', list, int(math.max(left, 0) + lease))
  if limit > 0 and rank < limit then
    local promoted = call('ZRANGE', OWNER, int(limit - 1), int(limit - 1))[1]
    if promoted and type(pcall_redis('LPUSH', WAKE .. promoted, '1')) == 'number' then
      call('PEXPIRE', WAKE .. promoted, int(lease))
    end
    return {1}
  end
  return {2}
end

return redis.error_reply('fairsem semaphore script: unknown operation ' .. tostring(op))
