-- status: every holder and waiter in ticket order, after reaping.
--   ARGV: status LIMIT LEASE_MS (LIMIT 0: whatever is stored)
--   Reply {now, limit, counter, W, (tenant, weight) * W,
--          (id, ticket, deadline, info, units, slots, queued, tenant)...}: the W tenants whose
--   weight is stored (tenants.lua), then the entries; slots as stored, "" for a waiter; queued:
--   when the entry queued (ms of the server clock), -1 if unknown; tenant: "" for the default.
--
-- Its function may run when Redis is out of memory (maxmemory): status still answers.
-- function flags: allow-oom

local refused, now, deadline = prepare_and_reap('status')
if refused then return refused end

local reply = {now, limit, tonumber(call('GET', COUNTER) or '0') or -1, 0}
if fair then
  local weights = call('HGETALL', WEIGHTS)
  reply[4] = #weights / 2
  for i = 1, #weights, 2 do
    reply[#reply + 1] = weights[i]
    reply[#reply + 1] = tonumber(weights[i + 1]) or 1
  end
end
local members = call('ZRANGE', OWNER, '0', '-1', 'WITHSCORES')
for i = 1, #members, 2 do
  local id = members[i]
  local info = call('HMGET', INFO, id, UNITS .. id, QUEUED .. id, TENANT .. id)
  local stored_slots = call('HGET', SLOTS, id)
  local units = tonumber(info[2] or '1') or 1
  if stored_slots then units = #(split(stored_slots) or {}) end
  reply[#reply + 1] = id
  reply[#reply + 1] = tonumber(members[i + 1])
  reply[#reply + 1] = tonumber(call('ZSCORE', TIME, id) or '0')
  reply[#reply + 1] = info[1] or ''
  reply[#reply + 1] = units
  reply[#reply + 1] = stored_slots or ''
  reply[#reply + 1] = tonumber(info[3] or '-1') or -1
  reply[#reply + 1] = info[4] or ''
end
return reply
