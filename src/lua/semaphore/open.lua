-- open: checks the key types, the counter and the limit (LimitMismatch: -1), stores the limit
-- on the semaphore's first use and sets up its slot bookkeeping, and stores an idle expiry
-- where none is (another one: -6; see "Idle expiry" in common.lua). Reply {1, EXPIRY}: the
-- idle expiry stored now (0: none), which a client that passed 0 passes on to its acquires
-- and resizes, so that the keys it makes again after an expiry expire too.
--   ARGV: open LIMIT LEASE_MS [IDLE_EXPIRY]
--
-- Its function may run when Redis is out of memory (maxmemory): a semaphore can still be
-- opened (it writes only the limit and the slot bookkeeping, and only on first use).
-- function flags: allow-oom

local refused = prepare('open', ARGV[4])
if refused then return refused end
return {1, expiry}
