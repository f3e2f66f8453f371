-- fold probe: a plain lease semaphore's acquire (expire old entries, count, add), as the npm
-- peer's algorithm does it; its release is one ZREM. For measurement only (fold_probe.sh).
-- KEYS: the set; ARGV: LIMIT ID TTL_MS NOW_MS.
local key, limit, id = KEYS[1], tonumber(ARGV[1]), ARGV[2]
local ttl, now = tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - ttl)
if redis.call('ZCARD', key) < limit then
  redis.call('ZADD', key, now, id)
  redis.call('PEXPIRE', key, ttl)
  return 1
end
return 0
