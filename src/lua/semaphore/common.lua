-- common: what every script of a fair, lease-based counting semaphore shares: its keys, its
-- data model and its small helpers. The build puts this file, tenants.lua (fair shares between
-- tenants, data model 3), slots.lua (the slot bookkeeping) and queue.lua (promotion, reaping and
-- prepare(), the checks each operation starts with) in front of each operation's own file
-- (open.lua, acquire.lua, release.lua, renew.lua, status.lua, evict.lua, resize.lua,
-- tenant.lua in this directory): one script per operation, each atomic,
-- each as Redis runs it in <build dir>/generated/lua/semaphore_<op>.lua.
--
-- KEYS (all share the hash tag {NAME}, so one semaphore lives in one cluster slot):
--   1 P:{NAME}:owner    ZSET  member = permit id, score = ticket (holders and waiters)
--   2 P:{NAME}:time     ZSET  member = permit id, score = lease deadline, ms of this server's clock
--   3 P:{NAME}:counter  STRING ticket counter (INCR only; a ticket is the fencing token)
--   4 P:{NAME}:meta     HASH  limit = the current limit; slots = how many slot numbers have
--                             been handed out so far (the slots at or above it are free);
--                             expiry, expires: see "Idle expiry" below;
--                             model, model_by: see "Data model" below
--   5 P:{NAME}:info     HASH  permit id -> owner info (who holds or waits); for a waiter
--                             that asks for more than one unit, {units}ID -> how many; for
--                             an entry whose Client has an inbox, {inbox}ID -> CLIENT; and for
--                             an entry that queued, {queued}ID -> when (ms of the server clock)
--   6 P:{NAME}:wake:    prefix of the per-waiter wake lists (LIST P:{NAME}:wake:ID) and of the
--                       Clients' inboxes (LIST P:{NAME}:wake:{inbox}CLIENT, one per Client
--                       waiting on the semaphore; a permit id has no '{', so none collides)
--   7 P:{NAME}:receipts: prefix of the release receipts' buckets (HASH P:{NAME}:receipts:E,
--                       field ID:TICKET of a released permit; see Receipts)
--   8 P:{NAME}:slots    HASH  holder id -> its slots, ascending, comma-separated (one per unit
--                             it holds): the holders are exactly its fields
--   9 P:{NAME}:free     ZSET  the free slots below meta's `slots` (member = score = slot)
-- and, for a semaphore whose requests name tenants (data model 3, see Tenants in tenants.lua),
-- keys named after these: OWNER:tenants, OWNER:queue:TENANT and META:weights.
--
-- Units. Every slot below meta's `slots` is either a holder's or in free, so the units held
-- are `slots` minus the size of free, read without walking the holders.
--
-- ARGV: 1 the operation's name (each script ignores it: every script takes the same first
-- arguments), 2 limit, 3 lease in ms, then per operation (see each file):
--   open     [IDLE_EXPIRY]        check key types and the limit; store the limit if unset
--   acquire  ID MODE OWNER_INFO [TICKET [UNITS [CLIENT [MAX_WAITERS [IDLE_EXPIRY [FRESH [TENANT]]]]]]]
--                                 MODE "try" (never queues) or "queue"; TICKET: the ticket a
--                                 waiter polling again already has (0 or absent: none yet);
--                                 UNITS: how many units (slots) it asks for, 1 when absent;
--                                 CLIENT: the waiter's Client's inbox (see Wake-ups below;
--                                 empty: none); IDLE_EXPIRY: see "Idle expiry" below;
--                                 FRESH 1: ID was drawn at random for this call and never
--                                 sent before (no entry, wake list or marker to look for);
--                                 TENANT: whose request it is (see tenants.lua; empty or
--                                 absent: the default tenant)
--   release  ID TICKET RECEIPT_MS [leaving | keep K]
--                                 TICKET 0: whatever entry ID has; "leaving": a waiter giving up
--                                 (either clears its wake list); "keep K": a holder gives back
--                                 all but its K lowest slots and keeps its permit
--   renew    ID TICKET ...        one call renews every permit of a process
--   status
--   evict    ID                   remove ID (holder or waiter) on an operator's request
--   resize   NEW_LIMIT [IDLE_EXPIRY]  store a new limit (see "Limits" below)
--   tenant   TENANT WEIGHT        store a tenant's weight (see tenants.lua)
-- Limit 0 ("whatever is stored") is accepted by status, evict, resize and tenant only, for tools that
-- do not know the limit; with no limit stored, status and evict neither reap nor promote.
-- A semaphore that does not exist (no limit stored, nobody queued: never used, or its keys
-- expired) is made by open and acquire only (and resize, which stores the limit it is given):
-- status, evict, release and renew write nothing to it.
--
-- Holders and slots. A member of owner holds a permit iff it has a field in slots; its value
-- lists the permit's slots, one per unit, numbers 0 .. limit-1 that no other holder has. The
-- holders are always the first members in ticket order (a waiter is only ever promoted from
-- the head of the queue), and after every run either nobody waits or the first waiter asks for
-- more units than are free: strict FIFO for every weight, so a small request never overtakes
-- a large one queued before it (which could otherwise starve). A holder that leaves (release,
-- reap, evict) hands its slots to the waiters its leaving promotes, or puts them back; a waiter
-- that leaves (its own leave, ticket 0, an eviction, a removal as too large, a reap) lets in the
-- waiters behind it that fit then, in the same run, with their wake-ups; an acquire granted at
-- once takes the lowest free slots. Since a waiter is promoted only behind
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
-- Wake-ups. A promotion pushes TICKET:SLOTS (the promoted entry's ticket and slots, e.g.
-- "17:0,3"); an eviction, or a removal as too large for the limit, pushes EVICTED or TOO-LARGE.
-- A waiter that queued with a CLIENT gets it in its Client's inbox, WAKE .. '{inbox}' .. CLIENT,
-- as "ID MESSAGE" (a permit id has no whitespace): one list per Client and semaphore, so the
-- Client's one BRPOP names as many keys as it waits on semaphores, however many waiters it has.
-- A waiter without one (a client of 0.2.0) gets MESSAGE in its own wake list, WAKE .. ID. A
-- wake-up popped for an earlier entry of the id, but read only after the waiter queued again
-- (its process was frozen past its lease), carries another ticket and is not taken as a grant.
-- Eviction (and removal as too large) also leaves its marker as the only element of the id's
-- own wake list, so a waiter polling with its TICKET and a holder's next renewal can each tell
-- "evicted" from "expired". A new entry for the id clears that list first.
--
-- Receipts. A release of a holder leaves a receipt, so that the same release run again after
-- its reply was lost can tell "released by the earlier run" ({3}) from "expired" ({0}). It is
-- kept at least RECEIPT_MS after the release (the client passes max(retry budget, lease), the
-- same to each run of a release), as the field ID:TICKET of a hash RECEIPTS .. E, a bucket of
-- the receipts that may go in the same W ms, named after when it expires: E = (floor((now +
-- RECEIPT_MS) / W) + 1) * W, ms of the server clock, and W = RECEIPT_BUCKET_MS doubled until
-- RECEIPT_MS is at most 16 W (4,096 ms for RECEIPT_MS up to 65 s). Two buckets of one name
-- expire together, whatever their W. So a release costs an HSET and a PEXPIREAT whatever the
-- history: nothing is pruned, no key grows with the release rate beyond W ms of releases, the
-- server frees a bucket whole when it expires, a semaphore has at most RECEIPT_MS / W + 2 of
-- them (18) per RECEIPT_MS its clients use, and every bucket expires, idle expiry or not. A
-- release that finds its entry gone looks for its receipt in every bucket one kept since now -
-- RECEIPT_MS can be in, and one more (a new master's clock up to W ms behind the old one's):
-- at most 18 HGETs, on that path only. A receipt not kept (a foreign key in a bucket's place,
-- or a bucket moved away by a Cluster slot migration, which pcall turns into an error value)
-- makes a retry answer "expired", never "released"; a new master whose clock is ahead by D ms
-- drops receipts up to D ms early.
--
-- Idle expiry. meta's `expiry` (ms; absent: 0, the keys never expire) is stored by the first
-- open, acquire or resize that passes an IDLE_EXPIRY above 0 (one with 0 follows what is stored; an
-- open with another value above 0 is refused, {-6, stored}). With it, every key of the
-- semaphore (counter and meta included) expires at meta's `expires`, ms of the server clock,
-- so a semaphore nobody holds or waits on disappears. Only an acquire that writes a deadline
-- (a waiter's poll too; a failed try or a refusal writes nothing) and a renew push `expires`
-- on (status, evict, resize and release do not: an operator watching a semaphore does not
-- keep it): when fewer than E = max(expiry, lease) ms are left,
-- to now + 1.5 E, with one PEXPIREAT per key. So every deadline written (now + lease) is
-- before `expires`, the keys stay while anyone holds or waits, they go between E and 1.5 E
-- after the last acquire or renew, and the seven PEXPIREATs are paid at most once per E / 2.
-- A key a run creates (owner, time, info and slots of a semaphore nobody used, free, counter,
-- or owner and time rebuilt by a reap) is given the same `expires` at once (born()). Redis
-- keeps a key through the millisecond its expiry names but deletes at once one whose
-- PEXPIREAT names now: so a run that creates a key when `expires` is now (or past, by the
-- clock it reads) pushes `expires` on for every key instead, as an acquire would, and the key
-- lives with the others.
-- Tickets go on across an expiry: every new counter starts at now * TICKETS_PER_MS, above
-- every ticket of the semaphore's earlier lives (docs/guarantees.md proves it), whether or not
-- the run that makes it knows of an expiry. A client that opened the semaphore with 0 passes
-- the expiry open found stored (open's reply) to its acquires and resizes, so that the keys it
-- makes again after an expiry expire too.
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
-- each); the function library (FCALL, see the state block below) builds them once.
-- Key types: open, status, evict and resize check the seven keys with TYPE (not the prefixes); the
-- other operations make their first access to each key they need through guarded(), a read or a
-- first write whose WRONGTYPE error becomes a refusal (undoing the writes before it), so a foreign
-- key is never written to. (slots and free are read by count_slots(), queue.lua, where the hot path
-- needs their sizes: an acquire of a semaphore nobody holds, and the release of its last holder, do
-- not.)
--
-- Data model. These scripts read and write data model MODEL: 2, that of every release since
-- 0.2 (0.1's, without slots and free, is upgraded on first use), and FAIR_MODEL, 3, which they
-- upgrade a semaphore to, in place, when a request first names a tenant or a weight is set
-- (tenants.lua): a client of 0.4 or earlier is then refused, naming both models and MODEL_BY. A later data model that they
-- could not read stores its number in meta's `model`, and the fairsem version that wrote it in
-- `model_by`; every operation reads meta first and refuses such a semaphore, {-7, model,
-- MODEL, model_by}, before it looks at any other key (whose type may have changed) or writes
-- anything. Absent, or at most MODEL: this model. Every later data model keeps meta a hash
-- with these two fields, so that each client of an earlier release is refused, never misled.
--
-- Replies are arrays. A negative first element is a refusal and nothing was written (but for
-- maintenance a refused call may have done first: storing the limit on first use, setting up
-- the slot bookkeeping, reaping):
--   {-1, stored_limit}                    the semaphore was opened with another limit
--   {-2, key, actual_type, wanted_type}   a key under the prefix belongs to something else
--   {-3, key}                             the counter is not an integer
--   {-4, limit}                           acquire: more units asked than the limit (ever)
--   {-5, waiting}                         acquire: the queue is at MAX_WAITERS
--   {-6, stored_expiry}                   open: another IDLE_EXPIRY is stored
--   {-7, model, MODEL, model_by}          the semaphore is in a later data model (FAIR_MODEL is
--                                         reported as the one these scripts read)
-- Otherwise:
--   open     {1, expiry}            expiry: meta's idle expiry in ms after the open (0: none)
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
--   status   {now, limit, counter, W, (tenant, weight) * W,
--             (id, ticket, deadline, info, units, slots, queued, tenant)...}
--                                         W: the tenants whose weight is stored; the entries
--                                         in ticket order; slots as stored, "" for a waiter;
--                                         queued: when the entry queued, -1 if it did not
--                                         (granted at once) or its client did not say (0.3.1)
--   evict    {state}                      1 a holder removed, 2 a waiter removed, 0 not present,
--                                         3 evicted already (its marker is still there)
--   resize   {old_limit, new_limit, promoted}
--   tenant   {old_weight}
--
-- Every operation is idempotent for a given permit id, so a client may repeat one whose reply
-- was lost. Each generated script runs on its own, e.g. from a build directory:
--   redis-cli --eval generated/lua/semaphore_status.lua o t c m i w: r: s f , status 1 1000

local WANTED = {'zset', 'zset', 'string', 'hash', 'hash', nil, nil, 'hash', 'zset'}
-- The data model these scripts read and write (see Data model above): 2, and 3 for a semaphore
-- whose requests name tenants (tenants.lua), written by fairsem MODEL_BY.
local MODEL, FAIR_MODEL, MODEL_BY = 2, 3, '@FAIRSEM_VERSION@'
local UNITS = '{units}'  -- info's field {units}ID: the units waiter ID asks for, when above 1
local INBOX = '{inbox}'  -- info's field {inbox}ID: the Client whose inbox wakes ID
local QUEUED = '{queued}'  -- info's field {queued}ID: when ID queued, ms of the server clock
local TENANT = '{tenant}'  -- info's field {tenant}ID: whose entry ID is, unless the default's
local WAS = '{was}'  -- info's field {was}ID: the ticket holder ID waited under (tenants.lua)
-- A new counter starts at the server's clock in ms times this: 2^53 (where Lua's numbers and
-- ZSET scores stop being exact) / 1024 ms is the year 2248.
local TICKETS_PER_MS = 1024
-- A receipts bucket holds the receipts that may go in the same this many ms, doubled until a
-- receipt's lifetime is at most RECEIPT_BUCKETS of them (see Receipts).
local RECEIPT_BUCKET_MS = 4096
local RECEIPT_BUCKETS = 16
-- The longest RECEIPT_MS a release takes (2^40 ms, some 35 years): server times past it stay
-- whole numbers that Lua and Redis hold exactly.
local MAX_RECEIPT_MS = 1099511627776

-- The state of one run, between the two markers: every other top-level name of the shared
-- parts is a constant or a function. The function library (FCALL) builds those once, at
-- FUNCTION LOAD, and runs these assignments again at the start of every call, so each line
-- here is a comment or one `local` declaration (cmake/FairsemEmbedScriptsRun.cmake checks).
-- state {
-- (redis.call is not there while FUNCTION LOAD builds the library, only during a call.)
local call, pcall_redis = redis.call, redis.pcall
local OWNER, TIME, COUNTER, META, INFO, WAKE = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local RECEIPTS, SLOTS, FREE = KEYS[7], KEYS[8], KEYS[9]
local limit, lease = tonumber(ARGV[2]), tonumber(ARGV[3])
-- How many slots free holds, when known (nil: not read yet). It saves a ZPOPMIN on an empty
-- set and a DEL of a missing one, the common case of a semaphore that is not full.
local free_count = nil
-- meta's `slots`: how many slot numbers have been handed out (each one below it is a holder's
-- or free). Set from meta by prepare() (queue.lua).
local top = 0
-- Holders (members of owner with slots) at the start of the operation, and as it changes them.
local held = nil
-- Whether held and free_count were read from slots and free by this run (count_slots()).
local slots_counted = false
-- Waiters promoted by this run (resize reports them).
local promoted_count = 0
-- meta's idle expiry in ms (0: none) and `expires`, when the keys expire (nil: not known).
local expiry, expires = 0, nil
-- Whether `expires` is known to be ahead of the clock (keep_alive() ran: born() need not look).
local expires_ahead = false
-- Whether prepare() found no semaphore, for an operation that must not make one (see there).
local absent = false
-- Whether the semaphore is in data model 3 (tenants.lua), and its virtual time there.
local fair, vtime = false, 0
-- The keys of data model 3 (tenants.lua): the tenants with waiters, and the stored weights.
-- Named by fair_keys() where data model 3 is read or made, so that a run in data model 2 (an
-- uncontended pair runs without prepare()) does not build the names.
local TENANTS, WEIGHTS = nil, nil
-- } state

-- The refusal for the error `err` that pcall_redis returned from a call on KEYS[i]: -2 naming
-- the key when it has the wrong type. Any other error ends the script as it is.
local function refusal(i, err)
  if string.find(err.err, 'WRONGTYPE', 1, true) then
    return {-2, KEYS[i], call('TYPE', KEYS[i])['ok'], WANTED[i]}
  end
  return error(err)
end

-- Runs a command on KEYS[i]. Returns its reply, or nil and refusal -2 naming the key when the
-- key has the wrong type (callers return the refusal, undoing their earlier writes first). (The
-- hot paths call pcall_redis themselves and refusal() on an error: a Lua function call, and one
-- taking `...` more so, is a good part of what a script costs.)
local function guarded(i, command, ...)
  local r = pcall_redis(command, KEYS[i], ...)
  if type(r) == 'table' and r.err then return nil, refusal(i, r) end
  return r
end

-- Numbers go to Redis as integer strings: Lua would format large ones with an exponent.
local function int(n) return string.format('%d', n) end

-- A holder's slots as stored ("3" or "0,2,5"): a list of strings, or nil if any is not a
-- whole number from 0 (only something edited behind the semaphore's back).
local function split(stored)
  if not string.find(stored, ',', 1, true) then
    -- One slot, the common case: no iterator to build.
    local n = tonumber(stored)
    if not n or n < 0 or n ~= math.floor(n) then return nil end
    return {stored}
  end
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

-- Wakes waiter `id` with `message`: through its Client's inbox `client` if it has one (a
-- string; nil or false: none), else through its own wake list.
local function wake(id, message, client)
  local list = WAKE .. id
  if client then
    list = WAKE .. INBOX .. client
    message = id .. ' ' .. message
  end
  -- A foreign key in the way only costs that waiter its wake-up: it polls.
  if type(pcall_redis('LPUSH', list, message)) == 'number' then
    -- A waiter polls at least every lease/3: a list nobody pops is gone after one lease.
    call('PEXPIRE', list, int(lease))
  end
end

-- The server's clock in whole milliseconds (rounded down).
local function server_ms()
  local t = call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The server's clock in ms, and the deadline of a lease taken now.
local function clock()
  local now = server_ms()
  return now, now + lease
end

-- A released permit's field in its receipts bucket.
local function receipt(id, ticket) return id .. ':' .. int(tonumber(ticket)) end

-- The width of the receipts buckets of receipts kept `receipt_ms` (see Receipts above).
local function bucket_width(receipt_ms)
  local width = RECEIPT_BUCKET_MS
  while receipt_ms > RECEIPT_BUCKETS * width do width = width * 2 end
  return width
end

-- Leaves the receipt of the release of permit `id` with `ticket`, kept `receipt_ms` (see
-- Receipts above). The release runs it before it removes the entry, so that a command its user
-- may not run fails the release with the entry whole.
local function keep_receipt(id, ticket, receipt_ms)
  local width = bucket_width(receipt_ms)
  local expires_at = (math.floor((server_ms() + receipt_ms) / width) + 1) * width
  local key = RECEIPTS .. int(expires_at)
  if type(pcall_redis('HSET', key, receipt(id, ticket), '1')) == 'number' then
    call('PEXPIREAT', key, int(expires_at))
  end
end

-- Whether permit `id` with `ticket` was released within the last `receipt_ms` (its receipt is
-- still there; see Receipts above). (A foreign key holds none: pcall's error is a table.)
local function was_released(id, ticket, receipt_ms)
  local now, field, width = server_ms(), receipt(id, ticket), bucket_width(receipt_ms)
  for expires_at = (math.floor(now / width) + 1) * width,
      (math.floor((now + receipt_ms) / width) + 2) * width, width do
    if type(pcall_redis('HGET', RECEIPTS .. int(expires_at), field)) == 'string' then
      return true
    end
  end
  return false
end

-- Idle expiry (see above): every key of the semaphore expires 1.5 E from `now`.
local function refresh_expiry(now)
  local e = math.max(expiry, lease)
  expires = now + e + math.floor(e / 2)
  call('HSET', META, 'expires', int(expires))
  for _, i in ipairs({1, 2, 3, 4, 5, 8, 9}) do call('PEXPIREAT', KEYS[i], int(expires)) end
  if fair then
    -- The tenants' keys too: the weights, and each waiting tenant's queue (tenants.lua).
    for _, key in ipairs({TENANTS, WEIGHTS, KEYS[1] .. ':idle'}) do
      call('PEXPIREAT', key, int(expires))
    end
    for _, member in ipairs(call('ZRANGE', TENANTS, '0', '-1')) do
      call('PEXPIREAT', OWNER .. ':queue:' .. string.sub(member, 18), int(expires))
    end
  end
end

-- Run by acquire and renew: pushes the expiry on when fewer than E ms are left.
local function keep_alive(now)
  if expiry > 0 and (not expires or expires - now <= math.max(expiry, lease)) then
    refresh_expiry(now)
  end
  expires_ahead = true  -- at least E ms ahead now
end

-- Names the keys of data model 3 (TENANTS, WEIGHTS above).
local function fair_keys()
  TENANTS, WEIGHTS = KEYS[1] .. ':tenants', KEYS[4] .. ':weights'
end

-- KEYS[i], which this run may just have created, expires with the others (in their last
-- millisecond, a PEXPIREAT at `expires` would delete it at once: see Idle expiry).
-- (`i` may also be the name of a key of data model 3.)
local function born(i)
  if expiry == 0 then return end
  if not expires or (not expires_ahead and expires <= server_ms()) then
    expires_ahead = true
    refresh_expiry(server_ms())
    -- A key of data model 3 refresh_expiry() does not find yet (a tenant's queue made before
    -- its member of OWNER:tenants) expires with the others too.
    if type(i) ~= 'number' then call('PEXPIREAT', i, int(expires)) end
    return
  end
  call('PEXPIREAT', type(i) == 'number' and KEYS[i] or i, int(expires))
end
