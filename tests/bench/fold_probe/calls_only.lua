#!lua name=fairsem_calls_only
-- fold probe: the Redis calls an uncontended acquire and release of the library make (a fresh
-- id on a semaphore nobody holds, then its release as the last holder out), the same calls with
-- the same arguments, and nothing else: no checks, no undoing, no helpers. For measurement only
-- (tests/bench/fold_probe.sh): what the pair's calls cost on their own, against the library's
-- pair. Same KEYS and ARGV as the library's functions; it assumes the semaphore was opened
-- (meta's limit and slots are stored) and that every acquire is granted.
redis.register_function('fairsem_calls_only_acquire', function(keys, args)
  local call, id = redis.call, args[4]
  call('HMGET', keys[4], 'limit', 'slots', 'expiry', 'expires', 'model', 'model_by')
  call('ZCARD', keys[1])
  local t = call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local deadline = now + tonumber(args[3])
  call('HSET', keys[4], 'slots', '1')
  call('HSET', keys[8], id, '0')
  call('ZADD', keys[2], string.format('%d', deadline), id)
  call('HSET', keys[5], id, args[6])
  local ticket = call('INCR', keys[3])
  call('ZADD', keys[1], ticket, id)
  return {1, ticket, deadline, 0, now, 0}
end)
redis.register_function('fairsem_calls_only_release', function(keys, args)
  local call, id = redis.call, args[4]
  call('HMGET', keys[4], 'limit', 'slots', 'expiry', 'expires', 'model', 'model_by')
  local ticket = call('ZSCORE', keys[1], id)
  call('HGET', keys[8], id)
  call('ZSCORE', keys[2], id)
  call('ZCARD', keys[1])
  call('HDEL', keys[5], id, '{units}' .. id, '{inbox}' .. id, '{queued}' .. id)
  local t = call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local expires = (math.floor((now + tonumber(args[6])) / 4096) + 1) * 4096
  local bucket = keys[7] .. string.format('%d', expires)
  call('HSET', bucket, id .. ':' .. ticket, '1')
  call('PEXPIREAT', bucket, string.format('%d', expires))
  call('DEL', keys[1], keys[2], keys[8], keys[5])
  call('HSET', keys[4], 'slots', '0')
  return {1}
end)
