#pragma once

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/protocol/replies.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "fairsem/impl/text.hpp"
#include "fairsem/version.hpp"

namespace fairsem::detail {

using std::chrono::milliseconds;

namespace replies_helpers {

/// The script returns fixed-size arrays; another size means another script or a corrupt reply.
FAIRSEM_INLINE const std::vector<Reply>& expect_elements(const Reply& reply, std::string_view what,
                                                         std::size_t count) {
  const auto& items = expect_type(reply, Reply::Type::array, what).elements;
  if (items.size() != count) {
    throw ProtocolError(fmt::format("fairsem: expected {} element{} in {}, got {}", count,
                                    count == 1 ? "" : "s", what, items.size()));
  }
  return items;
}

FAIRSEM_INLINE long long expect_at_least(const Reply& reply, std::string_view what, long long min) {
  const long long value = expect_integer(reply, what);
  if (value < min) {
    throw ProtocolError(fmt::format("fairsem: {} is {}; expected at least {}", what, value, min));
  }
  return value;
}

/// `deadline` - `now` as a lease. Both are checked to be non-negative first, so the difference
/// cannot overflow, and it is bounded, so adding it to a steady_clock time point cannot either.
// A slot: 0 .. kMaxLimit - 1.
FAIRSEM_INLINE long long expect_slot(const Reply& reply) {
  const long long slot = expect_at_least(reply, "the slot", 0);
  if (slot >= kMaxLimit) {
    throw ProtocolError(fmt::format("fairsem: slot {} is beyond the largest limit", slot));
  }
  return slot;
}

FAIRSEM_INLINE milliseconds expect_lease(const Reply& now_reply, const Reply& deadline_reply) {
  const long long now = expect_at_least(now_reply, "the server clock", 0);
  const long long deadline = expect_at_least(deadline_reply, "the lease deadline", 0);
  const long long lease = deadline - now;
  if (lease < 0 || lease > kMaxLease.count()) {
    throw ProtocolError(
        fmt::format("fairsem: the lease deadline is {} ms after the server clock; expected 0 to {}",
                    lease, kMaxLease.count()));
  }
  return milliseconds(lease);
}

/// A one-element reply {state} whose state is 0 to `max`.
FAIRSEM_INLINE long long expect_single_state(const Reply& reply, std::string_view what,
                                             long long max) {
  const auto& items = expect_elements(reply, what, 1);
  const long long state = expect_integer(items[0], what);
  if (state < 0 || state > max) {
    throw ProtocolError(fmt::format("fairsem: unknown state {} in {}", state, what));
  }
  return state;
}

}  // namespace replies_helpers

FAIRSEM_INLINE const std::vector<Reply>& check_script_reply(const Reply& reply,
                                                            const RefusalContext& context) {
  const auto& items = expect_array(reply, "the semaphore script's reply", 1);
  if (expect_integer(items[0], "the semaphore script's status") < 0) {
    throw_refusal(items, context);
  }
  return items;
}

FAIRSEM_INLINE void throw_refusal(const std::vector<Reply>& items, const RefusalContext& context) {
  const long long code = items.empty() ? 0 : expect_integer(items[0], "the refusal code");
  if (code == -1 && items.size() == 2) {
    const std::string& stored = expect_string(items[1], "the stored limit");
    const auto stored_value = parse_decimal(stored, static_cast<std::uint64_t>(LLONG_MAX));
    if (!stored_value) {
      throw ReplyError(fmt::format("fairsem: {}: the limit stored in '{}' is \"{}\", not a number; "
                                   "fairsem leaves it alone",
                                   context.where, context.meta_key, printable(stored)),
                       "ERR invalid stored limit");
    }
    const auto stored_limit = static_cast<long long>(*stored_value);
    throw LimitMismatchError(
        fmt::format("fairsem: {}: opened with limit {}, but Redis stores limit {} (set by the "
                    "semaphore's first user); nothing was changed",
                    context.where, context.limit, stored_limit),
        stored_limit, context.limit);
  }
  if (code == -2 && items.size() == 4) {
    throw ReplyError(
        fmt::format("fairsem: {}: key '{}' holds a {} where fairsem keeps a {}; it belongs to "
                    "something else, so fairsem leaves it alone (choose another key_prefix or "
                    "name)",
                    context.where, expect_string(items[1], "the refused key"),
                    expect_string(items[2], "the key's type"),
                    expect_string(items[3], "the expected type")),
        "WRONGTYPE Operation against a key holding the wrong kind of value");
  }
  if (code == -3 && items.size() == 2) {
    throw ReplyError(fmt::format("fairsem: {}: key '{}' does not hold an integer counter; it "
                                 "belongs to something else, so fairsem leaves it alone",
                                 context.where, expect_string(items[1], "the refused key")),
                     "ERR value is not an integer or out of range");
  }
  if (code == -4 && items.size() == 2) {
    const long long stored = replies_helpers::expect_at_least(items[1], "the stored limit", 1);
    throw InvalidArgument(
        fmt::format("fairsem: {}: asked for {} units, more than the limit {} "
                    "stored in Redis (after a resize); nothing was written",
                    context.where, context.units, stored));
  }
  if (code == -5 && items.size() == 2) {
    const long long waiting = replies_helpers::expect_at_least(items[1], "the queued requests", 0);
    throw QueueFullError(
        fmt::format("fairsem: {}: the queue is full: {} requests wait, and max_waiters is {}; "
                    "nothing was written",
                    context.where, waiting, context.max_waiters),
        waiting, context.max_waiters);
  }
  if (code == -6 && items.size() == 2) {
    const std::string& stored = expect_string(items[1], "the stored idle expiry");
    throw InvalidArgument(
        fmt::format("fairsem: {}: opened with idle_expiry {} ms, but Redis stores idle_expiry "
                    "{} ms (set by the semaphore's first user; open it with that, or with 0 "
                    "to follow it); nothing was changed",
                    context.where, context.idle_expiry, printable(stored)));
  }
  if (code == -7 && items.size() == 4) {
    const std::string& stored = expect_string(items[1], "the stored data model");
    const long long supported = expect_integer(items[2], "the scripts' data model");
    const std::string by =
        items[3].type == Reply::Type::nil ? std::string() : expect_string(items[3], "model_by");
    throw DataModelError(
        fmt::format(
            "fairsem: {}: the semaphore's keys are in data model {}{}, and this client "
            "(fairsem {}) reads and writes data model {}; nothing was changed: upgrade "
            "this client",
            context.where, printable(stored),
            by.empty() ? std::string() : fmt::format(" (written by fairsem {})", printable(by)),
            FAIRSEM_VERSION_STRING, supported),
        stored, supported, by);
  }
  throw ProtocolError(fmt::format("fairsem: {}: unexpected refusal {} from the semaphore script",
                                  context.where, code));
}

FAIRSEM_INLINE long long decode_open(const Reply& reply) {
  const auto& items = replies_helpers::expect_elements(reply, "the open reply", 2);
  if (expect_integer(items[0], "the open state") != 1) {
    throw ProtocolError(
        fmt::format("fairsem: unknown state {} in the open reply", items[0].integer));
  }
  return replies_helpers::expect_at_least(items[1], "the stored idle expiry", 0);
}

FAIRSEM_INLINE std::vector<long long> parse_slots(std::string_view text, std::string_view what) {
  std::vector<long long> slots;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    const std::string_view part = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    const auto slot = parse_decimal(part, static_cast<std::uint64_t>(kMaxLimit - 1));
    if (!slot || (!slots.empty() && static_cast<long long>(*slot) <= slots.back())) {
      throw ProtocolError(fmt::format("fairsem: {} \"{}\" is not a list of ascending slots", what,
                                      printable(text)));
    }
    slots.push_back(static_cast<long long>(*slot));
    if (comma == std::string_view::npos) return slots;
    start = comma + 1;
  }
}

FAIRSEM_INLINE AcquireReply decode_acquire(const Reply& reply) {
  const auto& items = expect_array(reply, "the acquire reply", 6);
  const long long state = expect_integer(items[0], "the acquire state");
  if (state != 1 && items.size() != 6) {
    throw ProtocolError(
        fmt::format("fairsem: expected 6 elements in an acquire reply of state {}, got {}", state,
                    items.size()));
  }
  AcquireReply r;
  switch (state) {
    case 0:
      r.state = AcquireState::full;
      break;
    case 1:
      r.state = AcquireState::granted;
      break;
    case 2:
      r.state = AcquireState::queued;
      break;
    case 3:
      r.state = AcquireState::evicted;
      break;
    case 4:
      r.state = AcquireState::too_large;
      break;
    default:
      throw ProtocolError(fmt::format("fairsem: unknown acquire state {}", state));
  }
  // Full, evicted and too large carry no entry: their ticket, deadline and position are
  // placeholders.
  if (r.state != AcquireState::granted && r.state != AcquireState::queued) {
    (void)expect_integer(items[1], "the ticket");
    (void)expect_integer(items[2], "the lease deadline");
    (void)expect_integer(items[3], "the queue position");
    (void)expect_integer(items[4], "the server clock");
    if (expect_integer(items[5], "the slot") != -1) {
      throw ProtocolError(
          fmt::format("fairsem: an acquire that got no permit reports slot {}", items[5].integer));
    }
    return r;
  }
  // Ticket 0 means "no entry" to release and acquire, so a permit can never carry it.
  r.ticket = replies_helpers::expect_at_least(items[1], "the ticket", 1);
  r.lease = replies_helpers::expect_lease(items[4], items[2]);
  if (r.state == AcquireState::granted) {
    if (expect_integer(items[3], "the queue position") != 0) {
      throw ProtocolError(
          fmt::format("fairsem: a granted acquire reports queue position {}", items[3].integer));
    }
    if (items.size() - 5 > static_cast<std::size_t>(kMaxLimit)) {
      throw ProtocolError("fairsem: a granted acquire reports more slots than the largest limit");
    }
    for (std::size_t i = 5; i < items.size(); ++i) {
      r.slots.push_back(replies_helpers::expect_slot(items[i]));
      if (r.slots.size() > 1 && r.slots.back() <= r.slots[r.slots.size() - 2]) {
        throw ProtocolError("fairsem: a granted acquire reports slots out of order");
      }
    }
  } else {
    r.position = replies_helpers::expect_at_least(items[3], "the queue position", 1);
    if (expect_integer(items[5], "the slot") != -1) {
      throw ProtocolError(
          fmt::format("fairsem: a queued acquire reports slot {}", items[5].integer));
    }
  }
  return r;
}

FAIRSEM_INLINE ReleaseState decode_release(const Reply& reply) {
  return static_cast<ReleaseState>(
      replies_helpers::expect_single_state(reply, "the release reply", 3));
}

FAIRSEM_INLINE RenewReply decode_renew(const Reply& reply, std::size_t permits) {
  if (permits > SIZE_MAX - 2) throw ProtocolError("fairsem: too many permits in a renew reply");
  const auto& items = replies_helpers::expect_elements(reply, "the renew reply", 2 + permits);
  RenewReply r;
  r.lease = replies_helpers::expect_lease(items[0], items[1]);
  r.states.reserve(permits);
  for (std::size_t i = 2; i < items.size(); ++i) {
    const long long state = replies_helpers::expect_at_least(items[i], "a renew state", -1);
    if (state == 1) {
      r.states.push_back(RenewState::held);
    } else if (state == 0) {
      r.states.push_back(RenewState::gone);
    } else if (state == -1) {
      r.states.push_back(RenewState::evicted);
    } else {
      r.states.push_back(RenewState::waiting);
    }
  }
  return r;
}

FAIRSEM_INLINE EvictResult decode_evict(const Reply& reply) {
  switch (replies_helpers::expect_single_state(reply, "the evict reply", 3)) {
    case 1:
      return EvictResult::holder;
    case 2:
      return EvictResult::waiter;
    case 3:
      return EvictResult::already_evicted;
    default:
      return EvictResult::not_found;
  }
}

FAIRSEM_INLINE WakeUp decode_wake(const Reply& reply) {
  if (reply.is_nil()) return {WakeReason::timeout, 0, {}};
  const auto& items = replies_helpers::expect_elements(reply, "the BRPOP reply", 2);
  (void)expect_string(items[0], "the wake list's name");
  const std::string& marker = expect_string(items[1], "the wake-up marker");
  if (marker == "evicted") return {WakeReason::evicted, 0, {}};
  if (marker == "too-large") return {WakeReason::too_large, 0, {}};
  // A promotion pushes the promoted entry's ticket and its slots: "TICKET:SLOTS".
  const std::string_view text = marker;
  const std::size_t colon = text.find(':');
  const auto ticket =
      colon == std::string_view::npos
          ? std::nullopt
          : parse_decimal(text.substr(0, colon), static_cast<std::uint64_t>(LLONG_MAX));
  if (!ticket || *ticket == 0) {
    throw ProtocolError(fmt::format("fairsem: unknown wake-up marker \"{}\" in the BRPOP reply",
                                    printable(marker)));
  }
  return {WakeReason::promoted, static_cast<long long>(*ticket),
          parse_slots(text.substr(colon + 1), "the wake-up marker")};
}

FAIRSEM_INLINE ResizeReply decode_resize(const Reply& reply) {
  const auto& items = replies_helpers::expect_elements(reply, "the resize reply", 3);
  ResizeReply r;
  r.old_limit = replies_helpers::expect_at_least(items[0], "the old limit", 0);
  r.new_limit = replies_helpers::expect_at_least(items[1], "the new limit", 1);
  r.promoted = replies_helpers::expect_at_least(items[2], "the number of promoted waiters", 0);
  return r;
}

FAIRSEM_INLINE milliseconds decode_server_clock(const Reply& reply) {
  using std::chrono::system_clock;
  // Larger values would overflow when converted to system_clock's (finer) duration.
  constexpr long long kMax =
      std::chrono::duration_cast<milliseconds>(system_clock::duration::max()).count();
  const long long ms = replies_helpers::expect_at_least(reply, "the server clock", 0);
  if (ms > kMax) {
    throw ProtocolError(
        fmt::format("fairsem: the server clock {} ms is beyond what system_clock holds", ms));
  }
  return milliseconds(ms);
}

}  // namespace fairsem::detail
