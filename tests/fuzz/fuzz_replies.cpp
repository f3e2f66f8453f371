// libFuzzer target: RESP bytes through parse_resp (hiredis's reader and fairsem's conversion),
// then every reply decoder of include/fairsem/impl/protocol/replies.hpp on every parsed reply.
//
// Only the documented errors are caught: ProtocolError from every decoder, and the refusal
// errors (LimitMismatchError, ReplyError) from check_script_reply/throw_refusal. Anything else
// escapes and libFuzzer reports it, as it does sanitizer findings and failed checks below.

#include <fairsem/impl/protocol/replies.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

using fairsem::detail::Reply;
using std::chrono::milliseconds;

void require(bool ok) {
  if (!ok) std::abort();
}

/// hiredis 0.14 allocates an array's element pointers as soon as it reads the header, so
/// "*2000000000\r\n" alone asks for 16 GB: a limit of hiredis, not of fairsem's decoding, that
/// libFuzzer would report as out-of-memory. Inputs declaring more elements than any input of
/// -max_len could hold are skipped (a '*' inside a bulk string may be caught too; no loss).
bool declares_huge_array(std::string_view bytes) {
  constexpr std::uint64_t kMaxElements = 1 << 16;
  for (std::size_t i = bytes.find('*'); i != std::string_view::npos; i = bytes.find('*', i + 1)) {
    std::size_t j = i + 1;
    if (j < bytes.size() && bytes[j] == '+') ++j;
    std::uint64_t count = 0;
    for (; j < bytes.size() && bytes[j] >= '0' && bytes[j] <= '9'; ++j) {
      count = count * 10 + static_cast<std::uint64_t>(bytes[j] - '0');
      if (count > kMaxElements) return true;
    }
  }
  return false;
}

/// The RESP2 encoding of `r`, to check that parse_resp reads back what it produced.
void append_resp(const Reply& r, std::string& out) {
  switch (r.type) {
    case Reply::Type::nil:
      out += "$-1\r\n";
      return;
    case Reply::Type::integer:
      out += ':' + std::to_string(r.integer) + "\r\n";
      return;
    case Reply::Type::string:
      out += '$' + std::to_string(r.str.size()) + "\r\n" + r.str + "\r\n";
      return;
    case Reply::Type::status:
      out += '+' + r.str + "\r\n";
      return;
    case Reply::Type::error:
      out += '-' + r.str + "\r\n";
      return;
    case Reply::Type::array:
      out += '*' + std::to_string(r.elements.size()) + "\r\n";
      for (const Reply& e : r.elements) append_resp(e, out);
      return;
  }
  std::abort();
}

bool same(const Reply& a, const Reply& b) {
  if (a.type != b.type || a.integer != b.integer || a.str != b.str ||
      a.elements.size() != b.elements.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.elements.size(); ++i) {
    if (!same(a.elements[i], b.elements[i])) return false;
  }
  return true;
}

/// Runs one decoder; a ProtocolError is a valid outcome for a malformed reply.
template <class Decode>
void decode(Decode&& run) {
  try {
    run();
  } catch (const fairsem::ProtocolError&) {
  }
}

void check_lease(milliseconds lease) {
  require(lease.count() >= 0 && lease <= fairsem::detail::kMaxLease);
  // As SemaphoreCore does with it; UBSan reports an overflow here.
  (void)(std::chrono::steady_clock::now() + lease);
}

void check_refusals(const Reply& reply) {
  const fairsem::detail::RefusalContext context{"semaphore 'fuzz' on fuzz:1", "fairsem:{fuzz}:meta",
                                                3, 1, 5};
  try {
    const auto& items = fairsem::detail::check_script_reply(reply, context);
    require(!items.empty() && items[0].type == Reply::Type::integer && items[0].integer >= 0);
  } catch (const fairsem::ProtocolError&) {
  } catch (const fairsem::LimitMismatchError& e) {
    require(e.stored_limit() >= 0 && e.requested_limit() == context.limit);
  } catch (const fairsem::ReplyError& e) {
    require(!e.server_message().empty());
  } catch (const fairsem::InvalidArgument&) {
    // {-4, limit}: more units asked than the stored limit.
  } catch (const fairsem::QueueFullError& e) {
    // {-5, waiting}: the queue was full.
    require(e.waiting() >= 0 && e.max_waiters() == context.max_waiters);
  }
  if (reply.type != Reply::Type::array) return;
  try {
    fairsem::detail::throw_refusal(reply.elements, context);
  } catch (const fairsem::ProtocolError&) {
    return;
  } catch (const fairsem::LimitMismatchError&) {
    return;
  } catch (const fairsem::ReplyError&) {
    return;
  } catch (const fairsem::InvalidArgument&) {
    return;
  } catch (const fairsem::QueueFullError&) {
    return;
  }
  std::abort();  // [[noreturn]]: unreachable
}

void decode_all(const Reply& reply) {
  using fairsem::detail::AcquireReply;
  using fairsem::detail::AcquireState;
  using fairsem::detail::ReleaseState;
  using fairsem::detail::RenewReply;
  check_refusals(reply);
  decode([&] { require(fairsem::detail::decode_open(reply) >= 0); });
  decode([&] {
    const AcquireReply r = fairsem::detail::decode_acquire(reply);
    if (r.state == AcquireState::granted || r.state == AcquireState::queued) {
      require(r.ticket >= 1);
      check_lease(r.lease);
      require((r.state == AcquireState::queued) == (r.position >= 1));
    }
    require((r.state == AcquireState::granted) == !r.slots.empty());
    for (std::size_t i = 0; i < r.slots.size(); ++i) {
      require(r.slots[i] >= 0 && r.slots[i] < fairsem::detail::kMaxLimit);
      require(i == 0 || r.slots[i] > r.slots[i - 1]);
    }
  });
  decode([&] {
    const auto state = static_cast<int>(fairsem::detail::decode_release(reply));
    require(state >= 0 && state <= static_cast<int>(ReleaseState::released_before));
  });
  std::vector<std::size_t> permit_counts = {0, 1};
  if (reply.type == Reply::Type::array && reply.elements.size() > 3) {
    permit_counts.push_back(reply.elements.size() - 2);
  }
  for (const std::size_t permits : permit_counts) {
    decode([&] {
      const RenewReply r = fairsem::detail::decode_renew(reply, permits);
      require(r.states.size() == permits);
      check_lease(r.lease);
    });
  }
  decode([&] {
    const fairsem::Status s = fairsem::detail::decode_status(reply);
    require(s.limit >= 0 && s.last_ticket >= -1);
    // Holders may outnumber the limit right after a shrink; they are told apart by slots.
    for (const fairsem::PermitInfo& info : s.holders) {
      require(!info.waited);
      require(info.slot >= 0 && info.slot < fairsem::detail::kMaxLimit);
      require(static_cast<long long>(info.slots.size()) == info.count);
      require(info.slots.front() == info.slot);
    }
    for (const fairsem::PermitInfo& info : s.waiters) {
      require(!info.waited || info.waited->count() >= 0);
      require(info.slot == -1 && info.slots.empty() && info.count >= 1);
    }
    for (const auto* list : {&s.holders, &s.waiters}) {
      for (const fairsem::PermitInfo& info : *list) require(info.lease_left.count() >= 0);
    }
  });
  decode([&] { (void)fairsem::detail::decode_evict(reply); });
  decode([&] {
    const fairsem::detail::WakeUp w = fairsem::detail::decode_wake(reply);
    require((w.reason == fairsem::detail::WakeReason::promoted) == !w.slots.empty());
    require((w.reason == fairsem::detail::WakeReason::promoted) == (w.ticket >= 1));
    for (const long long slot : w.slots) require(slot >= 0 && slot < fairsem::detail::kMaxLimit);
  });
  decode([&] {
    const fairsem::detail::ResizeReply r = fairsem::detail::decode_resize(reply);
    require(r.old_limit >= 0 && r.new_limit >= 1 && r.promoted >= 0);
  });
  decode([&] {
    // As probe_server does with it; UBSan reports an overflow here.
    (void)std::chrono::system_clock::time_point(fairsem::detail::decode_server_clock(reply));
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (declares_huge_array(bytes)) return -1;  // -1: not worth keeping in the corpus
  std::vector<Reply> replies;
  try {
    replies = fairsem::detail::parse_resp(bytes);
  } catch (const fairsem::ProtocolError&) {
    return 0;
  }
  for (const Reply& reply : replies) {
    std::string encoded;
    append_resp(reply, encoded);
    const std::vector<Reply> again = fairsem::detail::parse_resp(encoded);
    require(again.size() == 1 && same(again[0], reply));
    decode_all(reply);
  }
  return 0;
}
