-- open: checks the key types, the counter and the limit (LimitMismatch: -1), stores the limit
-- on the semaphore's first use and sets up its slot bookkeeping. Reply {1}.
--   ARGV: open LIMIT LEASE_MS

local refused = prepare('open')
if refused then return refused end
return {1}
