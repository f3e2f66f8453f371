#!lua name=fairsem_call_costs
-- What one call from Lua costs inside a function (FCALL), all in: the command, the bridge from
-- Lua to it and back, and the loop around it; for measurement only (tests/bench/call_costs.sh).
-- Each case runs N times in one call, timed by TIME before and after; a "new key" case creates
-- the key and deletes it again each time, as the uncontended path does with owner, time, info
-- and slots, while "existing key" adds and removes one member of a key that stays.
local N = 2000
local function micros()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
redis.register_function('fairsem_call_costs', function()
  local out = {}
  local function case(name, f)
    local started = micros()
    for i = 1, N do f(i) end
    out[#out + 1] = string.format('%-32s %6.3f', name, (micros() - started) / N)
  end
  redis.call('HSET', 'cc:{c}:meta', 'limit', 2, 'slots', 0)
  redis.call('ZADD', 'cc:{c}:kept', '+inf', '~')
  redis.call('HSET', 'cc:{c}:kepth', '~', '~')
  case('empty loop', function() end)
  case('TIME', function() redis.call('TIME') end)
  case('HMGET of 4 fields', function()
    redis.call('HMGET', 'cc:{c}:meta', 'limit', 'slots', 'expiry', 'expires')
  end)
  case('HGET', function() redis.call('HGET', 'cc:{c}:meta', 'limit') end)
  case('ZCARD', function() redis.call('ZCARD', 'cc:{c}:owner') end)
  case('ZCARD through pcall', function() redis.pcall('ZCARD', 'cc:{c}:owner') end)
  case('ZSCORE, missing member', function() redis.call('ZSCORE', 'cc:{c}:owner', 'x') end)
  case('INCR', function() redis.call('INCR', 'cc:{c}:counter') end)
  case('HINCRBY', function() redis.call('HINCRBY', 'cc:{c}:meta', 'slots', 1) end)
  case('HSET of a field', function() redis.call('HSET', 'cc:{c}:meta', 'slots', '0') end)
  case('ZADD+ZREM, new key', function(i)
    redis.call('ZADD', 'cc:{c}:z', i, 'id')
    redis.call('ZREM', 'cc:{c}:z', 'id')
  end)
  case('ZADD+ZREM, existing key', function(i)
    redis.call('ZADD', 'cc:{c}:kept', i, 'id')
    redis.call('ZREM', 'cc:{c}:kept', 'id')
  end)
  case('HSET+HDEL, new key', function()
    redis.call('HSET', 'cc:{c}:h', 'id', 'host 1')
    redis.call('HDEL', 'cc:{c}:h', 'id')
  end)
  case('HSET+HDEL, existing key', function()
    redis.call('HSET', 'cc:{c}:kepth', 'id', 'host 1')
    redis.call('HDEL', 'cc:{c}:kepth', 'id')
  end)
  case('DEL of a missing key', function() redis.call('DEL', 'cc:{c}:nothing') end)
  case('SET with PX, new key', function(i) redis.call('SET', 'cc:{c}:r:' .. i, i, 'PX', 60000) end)
  -- A receipt as a member of one sorted set per semaphore, as release.lua keeps it (TIME, the
  -- ZADD, a look at the 8th oldest, and every 8th time the prune of 8), at a steady 2,000.
  for i = 1, N do redis.call('ZADD', 'cc:{c}:receipts', i, 'r' .. i) end
  case('receipt in a sorted set', function(i)
    redis.call('TIME')
    redis.call('ZADD', 'cc:{c}:receipts', N + i, 'r' .. (N + i))
    local nth = redis.call('ZRANGE', 'cc:{c}:receipts', 7, 7, 'WITHSCORES')
    if tonumber(nth[2]) < i + 1 then redis.call('ZREMRANGEBYRANK', 'cc:{c}:receipts', 0, 7) end
  end)
  case('PEXPIRE', function() redis.call('PEXPIRE', 'cc:{c}:receipts', 60000) end)
  -- A receipt as release.lua keeps it now: TIME, a field of its bucket (one for these N), the
  -- bucket's expiry.
  case('receipt in a bucket', function(i)
    redis.call('TIME')
    local bucket = 'cc:{c}:receipts:' .. math.floor(i / 2000)
    redis.call('HSET', bucket, 'r' .. i, '1')
    redis.call('PEXPIREAT', bucket, 4102444800000)
  end)
  case('string.format %d', function(i) local _ = string.format('%d', i) end)
  redis.call('DEL', 'cc:{c}:receipts:0', 'cc:{c}:receipts:1')
  redis.call('DEL', 'cc:{c}:meta', 'cc:{c}:receipts', 'cc:{c}:kept', 'cc:{c}:kepth', 'cc:{c}:counter')
  return out
end)
