-- common: what every script of a fair, lease-based counting semaphore shares: its keys, its
-- data model and its small helpers. The build puts this file, slots.lua (the slot bookkeeping)
-- and queue.lua (promotion, reaping and prepare(), the checks each operation starts with) in
-- front of each operation's own file (open.lua, acquire.lua, release.lua, renew.lua,
-- status.lua, evict.lua, resize.lua in this directory): one script per operation, each atomic,
-- each as Redis runs it in <build dir>/generated/lua/semaphore_<op>.lua.
--
-- KEYS (all share the hash tag {NAME}, so one semaphore lives in one cluster slot):
--   1 P:{NAME}:owner    ZSET  member = permit id, score = ticket (holders and waiters)
--   2 P:{NAME}:time     ZSET  member = permit id, score = lease deadline, ms of this server's clock
--   3 P:{NAME}:counter  STRING ticket counter (INCR only; a ticket is the fencing token)
--   4 P:{NAME}:meta     HASH  limit = the current limit; slots = how many slot numbers have
--                             been handed out so far (the slots at or above it are free)
--   5 P:{NAME}:info     HASH  permit id -> owner info (who holds or waits); and for a waiter
--                             that asks for more than one unit, {units}ID -> how many
--   6 P:{NAME}:wake:    prefix of the per-waiter wake lists (LIST P:{NAME}:wake:ID)
--   7 P:{NAME}:released: prefix of release receipts (STRING P:{NAME}:released:ID, one lease)
--   8 P:{NAME}:slots    HASH  holder id -> its slots, ascending, comma-separated (one per unit
--                             it holds): the holders are exactly its fields
--   9 P:{NAME}:free     ZSET  the free slots below meta's `slots` (member = score = slot)
--
-- Units. Every slot below meta's `slots` is either a holder's or in free, so the units held
-- are `slots` minus the size of free, read without walking the holders.
--
-- ARGV: 1 the operation's name (each script ignores it: every script takes the same first
-- arguments), 2 limit, 3 lease in ms, then per operation (see each file):
--   open                          check key types and the limit; store the limit if unset
--   acquire  ID MODE OWNER_INFO [TICKET [UNITS]]
--                                 MODE "try" (never queues) or "queue"; TICKET: the ticket a
--                                 waiter polling again already has (0 or absent: none yet);
--                                 UNITS: how many units (slots) it asks for, 1 when absent
--   release  ID TICKET RECEIPT_MS [leaving | keep K]
--                                 TICKET 0: whatever entry ID has; "leaving": a waiter giving up
--                                 (either clears its wake list); "keep K": a holder gives back
--                                 all but its K lowest slots and keeps its permit
--   renew    ID TICKET ...        one call renews every permit of a process
--   status
--   evict    ID                   remove ID (holder or waiter) on an operator's request
--   resize   NEW_LIMIT            store a new limit (see "Limits" below)
-- Limit 0 ("whatever is stored") is accepted by status, evict and resize only, for tools that
-- do not know the limit; with no limit stored, status and evict neither reap nor promote.
--
-- Holders and slots. A member of owner holds a permit iff it has a field in slots; its value
-- lists the permit's slots, one per unit, numbers 0 .. limit-1 that no other holder has. The
-- holders are always the first members in ticket order (a waiter is only ever promoted from
-- the head of the queue), and after every run either nobody waits or the first waiter asks for
-- more units than are free: strict FIFO for every weight, so a small request never overtakes
-- a large one queued before it (which could otherwise starve). A holder that leaves (release,
-- reap, evict) hands its slots to the waiters its leaving promotes, or puts them back; an
-- acquire granted at once takes the lowest free slots. Since a waiter is promoted only behind
-- every holder, for one slot tickets strictly increase from holder to holder: the pair (slot,
-- ticket) fences.
--
-- Limits. Open refuses a limit other than the stored one; every other operation follows the
-- stored limit, so clients keep working through a resize. Growing promotes waiters at once;
-- shrinking takes nothing away: holders beyond the new limit keep their permits (and slots)
-- until they leave, and nobody is promoted until fewer than the new limit units are held. A
-- waiter asking for more units than the limit can never be granted: the resize that shrinks
-- the limit below it removes it with the marker TOO-LARGE in its wake list (its acquire
-- fails), and the waiters behind it move up (so does a promotion that reaches it, or its own
-- poll, should the limit have changed otherwise). A new request for more units than the
-- stored limit is refused ({-4, limit}) with nothing written.
--
-- A permit is ID *and* TICKET: release and renew act only on the entry with that ticket, so a
-- holder whose entry expired can never touch a later permit that reuses its id.
--
-- Eviction leaves the marker EVICTED as the only element of the evicted id's wake list, so the
-- waiter blocked on it, a waiter polling with its TICKET, and a holder's next renewal can each
-- tell "evicted" from "expired". A new entry for the id clears the list first. A promotion
-- pushes TICKET:SLOTS (the promoted entry's ticket and slots, e.g. "17:0,3") onto the waiter's
-- wake list: a wake-up popped for an earlier entry of the id, but read only after the waiter
-- queued again (its process was frozen past its lease), carries another ticket and is not
-- taken as a grant.
--
-- Reaping removes members whose deadline has passed and promotes the waiters their removal
-- lets in, waking each through its own wake list. It runs wherever someone could be kept
-- waiting by an expired member: an acquire that finds every permit taken, a waiter's poll,
-- renew, status, evict and resize (an acquire below the limit and a release need not).
-- "Passed" is strict: the clock is read in whole milliseconds (rounded down), so a deadline
-- equal to now may still be up to 1 ms ahead; reaping it would end a lease before the
-- client's own estimate.
--
-- Cost: each redis.call costs 0.2 to 1.2 microseconds (a write more than a read), so the hot
-- operations (acquire, release) make as few calls as they can. Run as a script (EVALSHA),
-- every function the shared parts define is built again on every run (about 0.1 microsecond
-- each); the function library (FCALL, see the state block below) builds them once. Key types: open, status, evict and resize check all seven keys with TYPE; the
-- other operations read slots and free first (guarded) and make their first access to each
-- other key through guarded(), a read or a first write whose WRONGTYPE error becomes a refusal
-- (undoing the writes before it), so a foreign key is never written to.
--
-- Replies are arrays. A negative first element is a refusal and nothing was written (but for
-- maintenance a refused call may have done first: storing the limit on first use, setting up
-- the slot bookkeeping, reaping; and a release that finds time foreign has already removed the
-- entry's owner info):
--   {-1, stored_limit}                    the semaphore was opened with another limit
--   {-2, key, actual_type, wanted_type}   a key under the prefix belongs to something else
--   {-3, key}                             the counter is not an integer
--   {-4, limit}                           acquire: more units asked than the limit (ever)
-- Otherwise:
--   open     {1}
--   acquire  {state, ticket, deadline, position, now, slot...}
--                                         state 1 granted (one slot per unit, ascending), 2
--                                         queued, 0 full, 3 the polling waiter was evicted, 4 it
--                                         was removed as too large for the limit; a single
--                                         slot -1 unless granted
--   release  {state}                      1 a holder released (or, with keep, now holds at
--                                         most K units), 2 a waiter left, 0 not present, 3
--                                         this permit was released by an earlier run
--   renew    {now, deadline, r...}        per id: 1 holder, 0 lost, -1 evicted,
--                                         k >= 2 waiting at k - 1
--   status   {now, limit, counter, id, ticket, deadline, info, units, slots, ...}
--                                         in ticket order; slots as stored, "" for a waiter
--   evict    {state}                      1 a holder removed, 2 a waiter removed, 0 not present,
--                                         3 evicted already (its marker is still there)
--   resize   {old_limit, new_limit, promoted}
--
-- Every operation is idempotent for a given permit id, so a client may repeat one whose reply
-- was lost. Each generated script runs on its own, e.g. from a build directory:
--   redis-cli --eval generated/lua/semaphore_status.lua o t c m i w: r: s f , status 1 1000

local WANTED = {'zset', 'zset', 'string', 'hash', 'hash', nil, nil, 'hash', 'zset'}
local UNITS = '{units}'  -- info's field {units}ID: the units waiter ID asks for, when above 1

-- The state of one run, between the two markers: every other top-level name of the shared
-- parts is a constant or a function. The function library (FCALL) builds those once, at
-- FUNCTION LOAD, and runs these assignments again at the start of every call, so each line
-- here is a comment or one `local` declaration (cmake/FairsemEmbedScriptsRun.cmake checks).
-- state {
-- (redis.call is not there while FUNCTION LOAD builds the library, only during a call.)
local call, pcall_redis = redis.call, redis.pcall
local OWNER, TIME, COUNTER, META, INFO, WAKE = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local RELEASED, SLOTS, FREE = KEYS[7], KEYS[8], KEYS[9]
local limit, lease = tonumber(ARGV[2]), tonumber(ARGV[3])
-- How many slots free holds, when known (nil: not read yet). It saves a ZPOPMIN on an empty
-- set and a DEL of a missing one, the common case of a semaphore that is not full.
local free_count = nil
-- meta's `slots`: how many slot numbers have been handed out (each one below it is a holder's
-- or free). Set from meta by prepare() (queue.lua).
local top = 0
-- Holders (members of owner with slots) at the start of the operation, and as it changes them.
local held = nil
-- Waiters promoted by this run (resize reports them).
local promoted_count = 0
-- } state

-- Runs a command on KEYS[i]. Returns its reply, or nil and refusal -2 naming the key when the
-- key has the wrong type (callers return the refusal, undoing their earlier writes first).
local function guarded(i, command, ...)
  local r = pcall_redis(command, KEYS[i], ...)
  if type(r) == 'table' and r.err then
    if string.find(r.err, 'WRONGTYPE', 1, true) then
      return nil, {-2, KEYS[i], call('TYPE', KEYS[i])['ok'], WANTED[i]}
    end
    return error(r)  -- any other error ends the script as it is
  end
  return r
end

-- Numbers go to Redis as integer strings: Lua would format large ones with an exponent.
local function int(n) return string.format('%d', n) end

-- A holder's slots as stored ("3" or "0,2,5"): a list of strings, or nil if any is not a
-- whole number from 0 (only something edited behind the semaphore's back).
local function split(stored)
  local slots = {}
  for slot in string.gmatch(stored, '[^,]+') do
    local n = tonumber(slot)
    if not n or n < 0 or n ~= math.floor(n) then return nil end
    slots[#slots + 1] = slot
  end
  if #slots == 0 then return nil end
  return slots
end

local function by_number(a, b) return tonumber(a) < tonumber(b) end
local function join(slots)
  table.sort(slots, by_number)
  return table.concat(slots, ',')
end

local function wake(id, message)
  -- A foreign key in the way only costs that waiter its wake-up: it polls.
  if type(pcall_redis('LPUSH', WAKE .. id, message)) == 'number' then
    -- A waiter polls at least every lease/3: a list nobody pops is gone after one lease.
    call('PEXPIRE', WAKE .. id, int(lease))
  end
end

-- The server's clock in whole milliseconds (rounded down), and the deadline of a lease taken
-- now.
local function clock()
  local t = call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  return now, now + lease
end
