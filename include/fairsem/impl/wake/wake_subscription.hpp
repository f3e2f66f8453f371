#pragma once

// WakeSubscription: one waiting request's registration with its Client's Waker (waker.hpp),
// through which it waits for its wake-up, and WakeWait, what one wait found. Internal. Defined
// in wake_subscription-inl.hpp.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/protocol/reply.hpp"

namespace fairsem::detail {

class Waker;

/// What one wait for a wake-up found.
struct WakeWait {
  /// The wake-up, as {its wake list's name, MESSAGE} (what decode_wake reads).
  std::optional<Reply> woken;
  std::string error;  // the waker's BRPOP was refused (ReplyError::server_message)
  /// The waker's BRPOP was cut off (its connection broke): a wake-up it popped is lost, so the
  /// waiter polls now rather than at its next poll interval.
  bool interrupted = false;
};

/// One waiting request's interest in its wake list: from subscribe() until destroyed. Used by
/// the one thread that waits.
class WakeSubscription {
 public:
  ~WakeSubscription();
  WakeSubscription(const WakeSubscription&) = delete;
  WakeSubscription& operator=(const WakeSubscription&) = delete;

  /// Waits up to `wait` for the wake-up (or for an error of the waker to report); an empty
  /// result when neither came.
  WakeWait wait_for(std::chrono::milliseconds wait);
  /// What came so far, without waiting (for a subscription with a hook).
  WakeWait take() { return wait_for(std::chrono::milliseconds(0)); }
  /// After a poll that found the request still queued: forgets an error not yet waited for,
  /// and listens again if a wake-up had ended the listening. A wake-up already delivered is
  /// kept: it may be for the entry the poll saw (promoted just after the poll ran); one for an
  /// earlier entry of the id carries another ticket, and the waiter drops it. So is a cut-off
  /// BRPOP since `since`, when the poll was sent (the poll may have run before the promotion
  /// whose wake-up that BRPOP lost), whether it came while listening or not: as an
  /// interruption, the next wait reports it. `conn`: as for Waker::subscribe.
  void rearm(Connection& conn, std::chrono::steady_clock::time_point since =
                                   std::chrono::steady_clock::time_point::max());

 private:
  friend class Waker;
  WakeSubscription(std::shared_ptr<Waker> waker, int slot, std::string key, std::string inbox,
                   std::function<void()> hook);

  std::shared_ptr<Waker> waker_;
  const int slot_;              // the lane it listens through
  std::string key_;             // the request's own wake list: its identity in the waker
  std::string inbox_;           // the inbox its wake-ups come through
  std::function<void()> hook_;  // called (on the waker's thread) when something came
  // Guarded by the waker's mutex.
  bool listed_ = true;  // in the waker's BRPOP; a delivered wake-up ends that
  std::optional<Reply> woken_;
  std::string error_;
  bool interrupted_ = false;
  std::chrono::steady_clock::time_point interrupted_at_;  // when its lane was cut off
  std::condition_variable cv_;
};

}  // namespace fairsem::detail
