-- server_clock: the Redis server's clock in milliseconds since the Unix epoch.
--
-- KEYS: none.  ARGV: none.
-- Returns: integer milliseconds (from TIME, which every fairsem lease deadline also uses).
--
-- Run on its own: redis-cli --eval src/lua/server_clock.lua
local t = redis.call('TIME')
return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
