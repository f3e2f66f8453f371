-- renew: extends the lease of every listed permit (one call per process and round), after
-- reaping; tells each one whether it still holds, waits, was evicted or is gone.
--   ARGV: renew LIMIT LEASE_MS (ID TICKET)...
--   Reply {now, deadline, r...}: per id 1 holder, 0 lost, -1 evicted, k >= 2 waiting at k - 1.
--
-- Its function may run when Redis is out of memory (maxmemory): holders keep their permits.
-- function flags: allow-oom

local refused, now, deadline = prepare_and_reap('renew')
if refused then return refused end
keep_alive(now)

local reply = {now, deadline}
local pairs_to_set = {}
-- Holders are the members up to the held-th ticket: one ZSCORE per permit tells a holder,
-- and only a waiter needs its rank.
local last_holder = -1
if held > 0 then
  last_holder = tonumber(call('ZRANGE', OWNER, int(held - 1), int(held - 1), 'WITHSCORES')[2])
end
for i = 4, #ARGV, 2 do
  local id, ticket = ARGV[i], tonumber(ARGV[i + 1])
  local score = call('ZSCORE', OWNER, id)
  if score and tonumber(score) == ticket then
    pairs_to_set[#pairs_to_set + 1] = int(deadline)
    pairs_to_set[#pairs_to_set + 1] = id
    if ticket <= last_holder then
      reply[#reply + 1] = 1
    else
      reply[#reply + 1] = call('ZRANK', OWNER, id) - held + 2
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
