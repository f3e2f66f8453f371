#pragma once

// Decoders for the replies fairsem's commands get: Reply in, plain values out. They do no I/O,
// so unit tests and the fuzzer (tests/fuzz) can feed them any shape. Whatever does not match
// what the scripts in src/lua/semaphore/ (or the command) return throws ProtocolError: a wrong
// type, a wrong element count, a state the script never returns, or a number out of range.

#include <chrono>
#include <cstddef>
#include <string_view>
#include <vector>

#include "fairsem/impl/protocol/reply.hpp"
#include "fairsem/semaphore.hpp"

namespace fairsem::detail {

/// The longest lease fairsem asks for. A reply implying a longer one is malformed, and the
/// bound keeps every deadline computed from a reply far from steady_clock overflow.
inline constexpr std::chrono::milliseconds kMaxLease = std::chrono::hours(24 * 30);

/// The largest limit (semaphore_options.hpp).
using fairsem::kMaxLimit;

/// Parses RESP2 bytes (any number of complete replies) with hiredis's reader and converts each
/// reply as Connection does. Throws ProtocolError for bytes hiredis rejects and for a trailing
/// incomplete reply. Defined in hiredis_reply-inl.hpp, next to that conversion.
std::vector<Reply> parse_resp(std::string_view bytes);

/// What the messages of a refusal name.
struct RefusalContext {
  std::string_view where;     // "semaphore 'NAME' on ENDPOINT"
  std::string_view meta_key;  // the key holding the stored limit
  long long limit = 0;        // the limit this client opened the semaphore with
  long long units = 1;        // the units an acquire asked for
  long long max_waiters = 0;  // the bound of the queue an acquire would join (0: none)
  long long idle_expiry = 0;  // the idle expiry this client opened the semaphore with, in ms
};

/// Any reply of the semaphore script: returns its elements when its first element (the
/// status) is not negative. A refusal throws as throw_refusal() does.
const std::vector<Reply>& check_script_reply(const Reply& reply, const RefusalContext& context);

/// A refusal's elements: {-1, stored_limit} throws LimitMismatchError (or ReplyError when the
/// stored limit is not a number), {-2, key, actual_type, wanted_type} and {-3, key} throw
/// ReplyError, {-4, stored_limit} (more units asked than the limit) InvalidArgument, {-5,
/// waiting} (max_waiters reached) QueueFullError, {-6, stored_expiry} (open with another idle
/// expiry) InvalidArgument, {-7, stored_model, supported_model, written_by} (a later data
/// model) DataModelError. Anything else throws ProtocolError.
[[noreturn]] void throw_refusal(const std::vector<Reply>& items, const RefusalContext& context);

/// The open reply, {1, expiry}: returns the idle expiry stored after the open, in ms (0: none).
long long decode_open(const Reply& reply);

enum class AcquireState {
  full,
  granted,
  queued,
  evicted,
  too_large  // the polling waiter asked for more units than a resize left: it was removed
};

struct AcquireReply {
  AcquireState state = AcquireState::full;
  long long ticket = 0;  // >= 1 when granted or queued, else 0
  /// Granted or queued: the server's deadline minus its clock, 0 to kMaxLease.
  std::chrono::milliseconds lease{0};
  long long position = 0;  // queued: 1-based queue position; else 0
  /// Granted: the permit's slots (one per unit), ascending, each 0 to kMaxLimit - 1; else none.
  std::vector<long long> slots;
};

/// {state, ticket, deadline, position, now, slot...}: one slot per unit when granted, else
/// a single -1.
AcquireReply decode_acquire(const Reply& reply);

enum class ReleaseState {
  not_present,      // 0: gone (expired, or its id names a later permit)
  holder_released,  // 1
  waiter_left,      // 2
  released_before   // 3: an earlier run whose reply was lost released it
};

/// {state}.
ReleaseState decode_release(const Reply& reply);

enum class RenewState {
  held,     // 1: renewed, still a holder
  gone,     // 0: not in Redis any more (expired or removed)
  evicted,  // -1
  waiting   // k >= 2: renewed, but behind the first `limit` tickets
};

struct RenewReply {
  std::chrono::milliseconds lease{0};  // the new deadline minus the server clock
  std::vector<RenewState> states;      // one per renewed permit, in request order
};

/// {now, deadline, r...} with exactly one r per permit of the request.
RenewReply decode_renew(const Reply& reply, std::size_t permits);

/// {now, limit, counter, (id, ticket, deadline, owner_info, units, slots)...}. Entries with
/// slots ("0,3": as many as units) are the holders and come first; "" marks a waiter.
/// lease_left is never negative.
Status decode_status(const Reply& reply);

/// {state}: 1 holder, 2 waiter, 3 already evicted, 0 not found.
EvictResult decode_evict(const Reply& reply);

enum class WakeReason {
  timeout,   // nil: BRPOP's timeout passed
  promoted,  // TICKET:SLOTS, pushed by the script that promoted the waiter
  evicted,   // "evicted", pushed by evict
  too_large  // "too-large": a resize left the waiter asking for more units than the limit
};

struct WakeUp {
  WakeReason reason = WakeReason::timeout;
  long long ticket = 0;          // promoted: the ticket of the entry promoted (>= 1)
  std::vector<long long> slots;  // promoted: the permit's slots, ascending
};

/// A holder's slots as the script stores and pushes them: "3" or "0,2,5", strictly ascending,
/// each 0 to kMaxLimit - 1. Throws ProtocolError naming `what` otherwise.
std::vector<long long> parse_slots(std::string_view text, std::string_view what);

/// The BRPOP reply on a waiter's wake list: nil, or {list, element}.
WakeUp decode_wake(const Reply& reply);

struct ResizeReply {
  long long old_limit = 0;  // 0: no limit was stored
  long long new_limit = 0;
  long long promoted = 0;  // waiters the new limit let in
};

/// {old_limit, new_limit, promoted}.
ResizeReply decode_resize(const Reply& reply);

/// {old_weight}: the weight the tenant had before (status_reply-inl.hpp).
long long decode_tenant(const Reply& reply);

/// The server_clock script's reply: milliseconds since the Unix epoch, small enough that a
/// system_clock time point holds it.
std::chrono::milliseconds decode_server_clock(const Reply& reply);

}  // namespace fairsem::detail
