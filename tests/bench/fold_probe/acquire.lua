-- fold probe: the uncontended path of an acquire over a folded data model, for measurement
-- only (tests/bench/fold_probe.sh); the library does not run it. It keeps what the library's
-- acquire guarantees on that path (the stored limit, a ticket from a counter that only grows,
-- a deadline by the server's clock, a slot, the owner info, a type check on the first access
-- to each key) but keeps the counter, the high-water mark of slots, the holder count and the
-- free-slot count as fields of meta, the owner info inside the holder's slots value, and skips
-- the retry lookup and the wake-list clean-up for an id that never queued (ARGV[7] = 1). Its
-- code is written inline, with no helper functions: a script builds its closures on every run.
-- Same KEYS as the library's scripts; ARGV: acquire LIMIT LEASE_MS ID MODE OWNER_INFO FRESH.
local OWNER, TIME, META, WAKE, SLOTS, FREE = KEYS[1], KEYS[2], KEYS[4], KEYS[6], KEYS[8], KEYS[9]
local limit, lease = tonumber(ARGV[2]), tonumber(ARGV[3])
local id, info, fresh = ARGV[4], ARGV[6], ARGV[7] == '1'
local meta = redis.pcall('HMGET', META, 'limit', 'counter', 'top', 'held', 'free')
if meta.err then return {-2, META} end
if meta[1] then limit = tonumber(meta[1]) end
local counter, top = tonumber(meta[2] or '0'), tonumber(meta[3] or '0')
local held, free = tonumber(meta[4] or '0'), tonumber(meta[5] or '0')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = now + lease
if not fresh then
  local ticket = redis.pcall('ZSCORE', OWNER, id)
  if ticket then return {1, tonumber(ticket), deadline, 0, now} end
end
local count = redis.pcall('ZCARD', OWNER)
if type(count) ~= 'number' then return {-2, OWNER} end
if count ~= held or top - free + 1 > limit then return {0, 0, 0, 0, now, -1} end
local ticket, slot = counter + 1, top
if free > 0 then
  slot = redis.call('ZPOPMIN', FREE)[1]
  free = free - 1
else
  top = top + 1
end
if type(redis.pcall('ZADD', TIME, deadline, id)) ~= 'number' then return {-2, TIME} end
redis.call('ZADD', OWNER, ticket, id)
if type(redis.pcall('HSET', SLOTS, id, slot .. '|' .. info)) ~= 'number' then
  redis.call('ZREM', TIME, id)
  redis.call('ZREM', OWNER, id)
  return {-2, SLOTS}
end
redis.call('HSET', META, 'limit', limit, 'counter', ticket, 'top', top, 'held', held + 1,
           'free', free)
if not fresh then redis.call('DEL', WAKE .. id) end
return {1, ticket, deadline, 0, now, tonumber(slot)}
