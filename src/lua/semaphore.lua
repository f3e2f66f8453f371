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
--   release  ID TICKET RECEIPT_MS TICKET 0: whatever entry ID has (a waiter giving up)
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
-- Every operation first reaps: members whose deadline has passed are removed, and exactly the
-- waiters their removal promoted are woken through their own wake lists. "Passed" is strict:
-- the clock is read in whole milliseconds (rounded down), so a deadline equal to now may still
-- be up to 1 ms ahead; reaping it would end a lease before the client's own estimate of it.
--
-- Replies are arrays. A negative first element is a refusal and nothing was written:
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
local EVICTED = 'evicted'

-- Up to this many expired members are removed one by one (ZREM); more at once are removed
-- with one ZINTERSTORE pass, which costs O(N) instead of O(k log N).
local FEW = 64
-- unpack() has a stack limit; bulk commands go in chunks of this many arguments.
local CHUNK = 1000

-- Numbers go to Redis as integer strings: Lua would format large ones with an exponent.
local function int(n) return string.format('%d', n) end

local function server_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function check_types()
  local wanted = {'zset', 'zset', 'string', 'hash', 'hash'}
  for i = 1, 5 do
    local actual = redis.call('TYPE', KEYS[i])['ok']
    if actual ~= 'none' and actual ~= wanted[i] then
      return {-2, KEYS[i], actual, wanted[i]}
    end
  end
  return nil
end

local function check_limit(store)
  local stored = redis.call('HGET', META, 'limit')
  if not stored then
    if store then redis.call('HSET', META, 'limit', int(limit)) end
    return nil
  end
  if tonumber(stored) ~= limit then return {-1, stored} end
  return nil
end

local function bulk(command, key, items)
  for i = 1, #items, CHUNK do
    redis.call(command, key, unpack(items, i, math.min(i + CHUNK - 1, #items)))
  end
end

local function wake(ids)
  for _, id in ipairs(ids) do
    local list = WAKE .. id
    redis.call('LPUSH', list, '1')
    -- A waiter polls at least every lease/3, so a list nobody pops is gone after one lease.
    redis.call('PEXPIRE', list, int(lease))
  end
end

local function reap(now)
  if limit == 0 then return end  -- a tool's read with no stored limit: holders are unknown
  local cutoff = '(' .. int(now)  -- deadlines strictly before now
  local expired_count = redis.call('ZCOUNT', TIME, '-inf', cutoff)
  local in_sync = redis.call('ZCARD', OWNER) == redis.call('ZCARD', TIME)
  if expired_count == 0 and in_sync then return end

  if in_sync and expired_count <= FEW then
    local expired = redis.call('ZRANGEBYSCORE', TIME, '-inf', cutoff)
    local holders_gone = 0
    for _, id in ipairs(expired) do
      local rank = redis.call('ZRANK', OWNER, id)
      if rank and rank < limit then holders_gone = holders_gone + 1 end
    end
    redis.call('ZREM', TIME, unpack(expired))
    redis.call('ZREM', OWNER, unpack(expired))
    redis.call('HDEL', INFO, unpack(expired))
    -- k holders left: the waiters now at ranks limit-k .. limit-1 were just promoted.
    if holders_gone > 0 then
      wake(redis.call('ZRANGE', OWNER, int(limit - holders_gone), int(limit - 1)))
    end
    return
  end

  -- Many expired at once, or owner and time disagree (a key was deleted or edited behind the
  -- semaphore's back): rebuild both as their intersection. WEIGHTS 1 0 keeps each set's own
  -- scores (tickets in owner, deadlines in time).
  local before = redis.call('ZRANGE', OWNER, 0, int(limit - 1))
  local expired = redis.call('ZRANGEBYSCORE', TIME, '-inf', cutoff)
  redis.call('ZREMRANGEBYSCORE', TIME, '-inf', cutoff)
  redis.call('ZINTERSTORE', OWNER, 2, OWNER, TIME, 'WEIGHTS', 1, 0)
  redis.call('ZINTERSTORE', TIME, 2, TIME, OWNER, 'WEIGHTS', 1, 0)
  bulk('HDEL', INFO, expired)
  if redis.call('HLEN', INFO) > redis.call('ZCARD', OWNER) then
    for _, id in ipairs(redis.call('HKEYS', INFO)) do
      if not redis.call('ZSCORE', OWNER, id) then redis.call('HDEL', INFO, id) end
    end
  end
  local was_holder = {}
  for _, id in ipairs(before) do was_holder[id] = true end
  local promoted = {}
  for _, id in ipairs(redis.call('ZRANGE', OWNER, 0, int(limit - 1))) do
    if not was_holder[id] then promoted[#promoted + 1] = id end
  end
  wake(promoted)
end

local function was_evicted(id)
  return redis.call('LINDEX', WAKE .. id, 0) == EVICTED
end

local function acquire(now)
  local id, mode, owner_info = ARGV[4], ARGV[5], ARGV[6]
  local polling = tonumber(ARGV[7] or '0') ~= 0
  local deadline = now + lease
  local ticket = redis.call('ZSCORE', OWNER, id)
  if ticket then
    -- Already a member (a retry after a lost reply, a waiter polling, or a caller-chosen id
    -- acquired again): renew it and report where it stands.
    redis.call('ZADD', TIME, int(deadline), id)
    local rank = redis.call('ZRANK', OWNER, id)
    if rank < limit then
      redis.call('DEL', WAKE .. id)
      return {1, tonumber(ticket), deadline, 0, now}
    end
    return {2, tonumber(ticket), deadline, rank - limit + 1, now}
  end
  if polling and was_evicted(id) then
    redis.call('DEL', WAKE .. id)
    return {3, 0, 0, 0, now}
  end
  local count = redis.call('ZCARD', OWNER)
  -- try never queues: when every permit is taken or anyone waits, it fails without writing.
  if mode == 'try' and count >= limit then return {0, 0, 0, 0, now} end
  ticket = redis.call('INCR', COUNTER)
  -- Tickets must only grow. If the counter was lost (evicted, deleted), continue after the
  -- newest ticket still queued rather than sort a newcomer ahead of the holders.
  local last = redis.call('ZRANGE', OWNER, -1, -1, 'WITHSCORES')
  if last[2] and ticket <= tonumber(last[2]) then
    ticket = tonumber(last[2]) + 1
    redis.call('SET', COUNTER, int(ticket))
  end
  redis.call('ZADD', OWNER, int(ticket), id)
  redis.call('ZADD', TIME, int(deadline), id)
  redis.call('HSET', INFO, id, owner_info)
  -- A caller-chosen id may find an old eviction marker (or wake-up) in its list.
  redis.call('DEL', WAKE .. id)
  -- Tickets only grow, so the new member is last: its rank is the old member count.
  if count < limit then return {1, ticket, deadline, 0, now} end
  return {2, ticket, deadline, count - limit + 1, now}
end

local function release(now)
  local id, ticket, receipt_ms = ARGV[4], tonumber(ARGV[5]), ARGV[6]
  local receipt = RELEASED .. id
  local score = redis.call('ZSCORE', OWNER, id)
  if not score or (ticket ~= 0 and tonumber(score) ~= ticket) then
    -- Gone, or the id now names a later permit: released by an earlier run of this call whose
    -- reply was lost (its receipt says so), or expired.
    if ticket ~= 0 and tonumber(redis.call('GET', receipt)) == ticket then return {3} end
    return {0}
  end
  redis.call('DEL', WAKE .. id)
  local rank = redis.call('ZRANK', OWNER, id)
  redis.call('ZREM', OWNER, id)
  redis.call('ZREM', TIME, id)
  redis.call('HDEL', INFO, id)
  if rank < limit then
    -- A receipt, so that a retry after a lost reply can tell "released" from "expired".
    redis.call('SET', receipt, score, 'PX', receipt_ms)
    -- One holder left: the waiter now at rank limit-1 (if any) was just promoted.
    wake(redis.call('ZRANGE', OWNER, int(limit - 1), int(limit - 1)))
    return {1}
  end
  return {2}
end

local function renew(now)
  local deadline = now + lease
  local reply = {now, deadline}
  local pairs_to_set = {}
  for i = 4, #ARGV, 2 do
    local id, ticket = ARGV[i], tonumber(ARGV[i + 1])
    local score = redis.call('ZSCORE', OWNER, id)
    local rank = nil
    if score and tonumber(score) == ticket then rank = redis.call('ZRANK', OWNER, id) end
    if not rank then
      if was_evicted(id) then reply[#reply + 1] = -1 else reply[#reply + 1] = 0 end
    else
      pairs_to_set[#pairs_to_set + 1] = int(deadline)
      pairs_to_set[#pairs_to_set + 1] = id
      if rank < limit then reply[#reply + 1] = 1 else reply[#reply + 1] = rank - limit + 2 end
    end
  end
  bulk('ZADD', TIME, pairs_to_set)
  return reply
end

local function evict(now)
  local id = ARGV[4]
  local rank = redis.call('ZRANK', OWNER, id)
  if not rank then
    -- Evicted already: by an earlier run of this call whose reply was lost, or by another.
    if was_evicted(id) then return {3} end
    return {0}
  end
  local left = tonumber(redis.call('ZSCORE', TIME, id) or now) - now
  redis.call('ZREM', OWNER, id)
  redis.call('ZREM', TIME, id)
  redis.call('HDEL', INFO, id)
  local list = WAKE .. id
  redis.call('DEL', list)
  redis.call('LPUSH', list, EVICTED)
  -- Kept until the holder's next renewal (due before its deadline) has surely seen it.
  redis.call('PEXPIRE', list, int(math.max(left, 0) + lease))
  if limit > 0 and rank < limit then
    wake(redis.call('ZRANGE', OWNER, int(limit - 1), int(limit - 1)))
    return {1}
  end
  return {2}
end

local function status(now)
  local stored = tonumber(redis.call('HGET', META, 'limit') or limit)
  local reply = {now, stored, tonumber(redis.call('GET', COUNTER) or '0') or -1}
  local members = redis.call('ZRANGE', OWNER, 0, -1, 'WITHSCORES')
  for i = 1, #members, 2 do
    local id = members[i]
    reply[#reply + 1] = id
    reply[#reply + 1] = tonumber(members[i + 1])
    reply[#reply + 1] = tonumber(redis.call('ZSCORE', TIME, id) or '0')
    reply[#reply + 1] = redis.call('HGET', INFO, id) or ''
  end
  return reply
end

-- Refusals come first, before anything is written.
local refused = check_types()
if refused then return refused end
if limit == 0 then
  if op ~= 'status' and op ~= 'evict' then
    return redis.error_reply('fairsem semaphore script: limit 0 is only for status and evict')
  end
  local stored = redis.call('HGET', META, 'limit')
  if stored and not tonumber(stored) then return {-1, stored} end
  limit = tonumber(stored or '0')
end
refused = check_limit(op == 'open' or op == 'acquire')
if refused then return refused end
if op == 'acquire' then
  local counter = redis.call('GET', COUNTER)
  if counter and not string.match(counter, '^%-?%d+$') then return {-3, COUNTER} end
end

local now = server_now()
if op == 'open' then return {1} end
reap(now)
if op == 'acquire' then return acquire(now) end
if op == 'release' then return release(now) end
if op == 'renew' then return renew(now) end
if op == 'status' then return status(now) end
if op == 'evict' then return evict(now) end
return redis.error_reply('fairsem semaphore script: unknown operation ' .. tostring(op))
