-- open: checks the key types, the counter and the limit (LimitMismatch: -1), stores the limit
-- on the semaphore's first use and sets up its slot bookkeeping. Reply {1}.
--   ARGV: open LIMIT LEASE_MS
--
-- Its function may run when Redis is out of memory (maxmemory): a semaphore can still be
-- opened (it writes only the limit and the slot bookkeeping, and only on first use).
-- function flags: allow-oom

local refused = prepare('open')
if refused then return refused end
return {1}
