#pragma once

// The Client's wake-up path: one thread and one connection (per cluster slot) wait, with one
// BRPOP over every subscribed wake list, for the wake-ups the semaphore script pushes, and
// hand each to the waiting thread it is for. A waiting acquire holds no connection of its own.
// Internal.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "fairsem/connection_options.hpp"
#include "fairsem/impl/connection.hpp"
#include "fairsem/impl/discovery.hpp"

namespace fairsem::detail {

class Waker;

/// What one wait for a wake-up found.
struct WakeWait {
  std::optional<Reply> woken;  // the BRPOP reply that popped this subscription's list
  std::string error;           // the waker's BRPOP was refused (ReplyError::server_message)
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
  /// earlier entry of the id carries another ticket, and the waiter drops it. `conn`: as for
  /// Waker::subscribe.
  void rearm(Connection& conn);

 private:
  friend class Waker;
  WakeSubscription(std::shared_ptr<Waker> waker, std::string key, std::function<void()> hook);

  std::shared_ptr<Waker> waker_;
  std::string key_;
  std::function<void()> hook_;  // called (on the waker's thread) when something came
  // Guarded by the waker's mutex.
  bool listed_ = true;  // in the waker's BRPOP; a delivered wake-up ends that
  std::optional<Reply> woken_;
  std::string error_;
  bool interrupted_ = false;
  std::condition_variable cv_;
};

class Waker : public std::enable_shared_from_this<Waker> {
 public:
  /// For commands on cluster slot `slot` (-1 standalone); `kick_key` is a list in that slot,
  /// under a key prefix the user may write, that nobody else uses.
  Waker(ConnectionOptions options, std::shared_ptr<Discovery> discovery, int slot,
        std::string kick_key);
  /// Stops the thread: interrupts its BRPOP and joins it.
  ~Waker();
  Waker(const Waker&) = delete;
  Waker& operator=(const Waker&) = delete;

  /// Starts listening on wake list `key`, and tells the waker's BRPOP so through `conn` (a
  /// pool connection in the same slot; if that fails, its next BRPOP, at most a second later,
  /// includes the key). Throws std::system_error if the thread cannot start.
  std::unique_ptr<WakeSubscription> subscribe(const std::string& key, Connection& conn,
                                              std::function<void()> hook = {});
  /// Stops the thread (the destructor does); subscriptions left wait out their time.
  void stop() noexcept;

 private:
  friend class WakeSubscription;
  /// Adds `sub` to the next BRPOP, and kicks a BRPOP under way so that it comes at once.
  void list(WakeSubscription& sub, Connection& conn);
  void unsubscribe(const WakeSubscription& sub) noexcept;
  void run();
  /// One BRPOP over `keys` (the kick list first); hands a wake-up to its subscription. True
  /// when the BRPOP was refused: the thread pauses before the next.
  bool listen(Connection& conn, const std::vector<std::string>& keys);
  /// Tells every subscription that the BRPOP was refused with `error`.
  void report(const std::string& error);
  /// Tells every subscription that a BRPOP under way was cut off, as report() does.
  void interrupted();
  /// Sets what `mark` sets on every subscription and wakes their waiters; their hooks are due.
  void notify_every(const std::function<void(WakeSubscription&)>& mark);
  /// Calls the hooks due (without the lock), keeping this Waker alive meanwhile. False when this
  /// Waker is gone: destroyed by a hook (the runtime's last reference), or being destroyed.
  bool call_due_hooks(const std::weak_ptr<Waker>& weak);
  /// Waits a moment (or until stopped) before trying again.
  void pause();

  const ConnectionOptions options_;
  const std::shared_ptr<Discovery> discovery_;
  const int slot_;
  const std::string kick_key_;

  std::mutex mu_;  // guards subs_, stop_, thread_ and every subscription's result
  std::condition_variable cv_;
  std::unordered_multimap<std::string, WakeSubscription*> subs_;  // by wake list
  bool stop_ = false;
  bool listening_ = false;  // a BRPOP is under way with the keys it had when it began
  int fd_ = -1;             // the socket a BRPOP waits on, for stop() to shut down
  bool cut_ = false;        // the last BRPOP was sent, and its reply never came (thread only)
  std::vector<std::function<void()>> due_hooks_;  // to call after this round (thread only)
  std::thread thread_;
};

}  // namespace fairsem::detail
