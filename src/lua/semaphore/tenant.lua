-- tenant: stores a tenant's weight for every client (tenants.lua), upgrading the semaphore to
-- data model 3 if it is not yet. A weight changes how far each later grant moves the tenant's
-- virtual time on; the grants before it stay as they were.
--   ARGV: tenant LIMIT LEASE_MS TENANT WEIGHT (LIMIT 0: whatever is stored)
--   WEIGHT: a whole number from 1 (1, the default, is stored as no weight).
--   Reply {old_weight}.

local tenant, weight = ARGV[4], tonumber(ARGV[5] or '')
if not tenant or not weight or weight < 1 or weight % 1 ~= 0 or weight > 2 ^ 53 then
  return redis.error_reply('fairsem semaphore script: tenant needs TENANT and a WEIGHT '
    .. '(a whole number from 1)')
end
local refused = prepare('tenant')
if refused then return refused end
if not fair then upgrade_to_fair(held or 0) end
local old = weight_of(tenant)
if weight == 1 then
  call('HDEL', WEIGHTS, tenant)
else
  call('HSET', WEIGHTS, tenant, int(weight))
  born(WEIGHTS)
end
return {old}
