-- fold probe: a holder's release over the folded data model of acquire.lua (measurement only,
-- see there): ticket check, receipt for a retry after a lost reply, the look for a waiter to
-- promote, the slot back to free or the bookkeeping reset when the last holder leaves.
-- ARGV: release LIMIT LEASE_MS ID TICKET RECEIPT_MS.
local OWNER, TIME, META, WAKE, RELEASED = KEYS[1], KEYS[2], KEYS[4], KEYS[6], KEYS[7]
local SLOTS, FREE = KEYS[8], KEYS[9]
local id, ticket, receipt_ms = ARGV[4], tonumber(ARGV[5]), ARGV[6]
local meta = redis.pcall('HMGET', META, 'top', 'held', 'free')
if meta.err then return {-2, META} end
local held, free = tonumber(meta[2] or '0'), tonumber(meta[3] or '0')
local score = redis.pcall('ZSCORE', OWNER, id)
if type(score) == 'table' then return {-2, OWNER} end
if not score or (ticket ~= 0 and tonumber(score) ~= ticket) then
  if ticket ~= 0 and tonumber(redis.pcall('GET', RELEASED .. id)) == ticket then return {3} end
  return {0}
end
local stored = redis.pcall('HGET', SLOTS, id)
if type(stored) == 'table' then return {-2, SLOTS} end
if type(redis.pcall('ZREM', TIME, id)) ~= 'number' then return {-2, TIME} end
redis.call('ZREM', OWNER, id)
if not stored then
  redis.call('DEL', WAKE .. id)
  return {2}
end
redis.call('HDEL', SLOTS, id)
redis.call('SET', RELEASED .. id, score, 'PX', receipt_ms)
held = held - 1
if redis.call('ZCARD', OWNER) > held then
  redis.call('ZRANGE', OWNER, held, held, 'WITHSCORES')  -- the promotion would start here
end
if held == 0 then
  if free > 0 then redis.call('DEL', FREE) end
  redis.call('HSET', META, 'top', 0, 'held', 0, 'free', 0)
else
  local slot = string.match(stored, '^[^|]*')
  redis.call('ZADD', FREE, slot, slot)
  redis.call('HSET', META, 'held', held, 'free', free + 1)
end
return {1}
