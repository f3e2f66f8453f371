#pragma once

// The Client's wake-up path: one thread and one connection (per cluster slot) wait, with one
// BRPOP over the Client's inbox of every semaphore it waits on, for the wake-ups the semaphore
// scripts push there ("ID MESSAGE"), and hand each to the waiting request it is for. The keys
// of that BRPOP follow the semaphores waited on, never the number of waiters; a waiting acquire
// holds no connection of its own. Internal.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fairsem/connection_options.hpp"
#include "fairsem/impl/connection.hpp"
#include "fairsem/impl/discovery.hpp"

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
  /// earlier entry of the id carries another ticket, and the waiter drops it. `conn`: as for
  /// Waker::subscribe.
  void rearm(Connection& conn);

 private:
  friend class Waker;
  WakeSubscription(std::shared_ptr<Waker> waker, std::string key, std::string inbox,
                   std::function<void()> hook);

  std::shared_ptr<Waker> waker_;
  std::string key_;             // the request's own wake list: its identity in the waker
  std::string inbox_;           // the inbox its wake-ups come through
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
  /// under a key prefix the user may write, that nobody else uses. `client`: the name of this
  /// waker's inboxes (random; no permit id can be one; the same for every waker of a Client, so
  /// that a waker made again routes as the one it replaces). With no request listening for
  /// `idle_timeout` (ClientOptions::idle_timeout), the thread ends and closes its connection; the
  /// next subscription starts them again.
  Waker(ConnectionOptions options, std::shared_ptr<Discovery> discovery, int slot,
        std::string kick_key, std::string client, std::chrono::milliseconds idle_timeout);
  /// Stops the thread: interrupts its BRPOP and joins it.
  ~Waker();
  Waker(const Waker&) = delete;
  Waker& operator=(const Waker&) = delete;

  /// What the semaphore scripts are told (their CLIENT argument) so that they push a waiter's
  /// wake-ups to this waker's inbox.
  const std::string& client() const noexcept { return client_; }
  /// The inbox of the semaphore whose wake lists are under `wake_prefix`.
  std::string inbox(const std::string& wake_prefix) const;
  /// Starts listening for the wake-ups of the request whose wake list is `wake_prefix` + `id`,
  /// which come through inbox(wake_prefix); when that inbox is new to a BRPOP under way, tells
  /// it so through `conn` (a pool connection in the same slot; if that fails, its next BRPOP,
  /// at most a second later, includes the inbox). Throws std::system_error if the thread cannot
  /// start.
  std::unique_ptr<WakeSubscription> subscribe(const std::string& wake_prefix, const std::string& id,
                                              Connection& conn, std::function<void()> hook = {});
  /// Stops the thread (the destructor does); subscriptions left wait out their time.
  void stop() noexcept;
  /// Whether its thread runs (and holds a connection): from the first subscription until it
  /// has been idle for the idle timeout, or stopped.
  bool running() const;

 private:
  friend class WakeSubscription;
  /// One semaphore's inbox: how many subscriptions listen through it, and since when none.
  struct Inbox {
    std::size_t listed = 0;
    std::chrono::steady_clock::time_point idle_since;
  };
  /// A wake-up popped while no subscription listened for it, and when.
  struct Unclaimed {
    std::string message;
    std::chrono::steady_clock::time_point at;
  };
  /// Adds `sub` to the next BRPOP, and kicks a BRPOP under way that lacks its inbox; or hands
  /// it the wake-up that came for it before it listened.
  void list(WakeSubscription& sub, Connection& conn);
  /// With mu_ held: `sub` (at `it` in subs_) gets {its wake list, `message`} and stops listening;
  /// its waiter wakes. True when its hook is due.
  bool hand_over(std::unordered_multimap<std::string, WakeSubscription*>::iterator it,
                 std::string message);
  /// With mu_ held: keeps a wake-up nobody listens for (yet) for kUnclaimedLifetime, for a
  /// waiter that subscribes after its promotion was popped.
  void keep_unclaimed(std::string key, std::string message);
  /// With mu_ held: forgets the unclaimed wake-ups kept kUnclaimedLifetime or longer.
  void forget_unclaimed(std::chrono::steady_clock::time_point now);
  void unsubscribe(const WakeSubscription& sub) noexcept;
  /// With mu_ held: `sub` leaves subs_ (at `it`); its inbox is kept a while after its last.
  void unlist(std::unordered_multimap<std::string, WakeSubscription*>::iterator it);
  /// With mu_ held: the kick list, then every inbox listened through or idle for less than
  /// kInboxLinger (the others are forgotten); forgets the unclaimed wake-ups past their time.
  void collect_keys(std::vector<std::string>& keys);
  /// A BRPOP's reply {inbox, "ID MESSAGE"} to the subscription it is for, if any.
  void deliver(Reply reply);
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
  const std::string client_;
  const std::string inbox_suffix_;  // "{inbox}" + client_
  const std::chrono::milliseconds idle_timeout_;

  mutable std::mutex mu_;  // guards subs_, inboxes_, in_brpop_, unclaimed_, stop_, thread_, results
  std::condition_variable cv_;
  std::unordered_multimap<std::string, WakeSubscription*> subs_;  // by wake list
  std::unordered_map<std::string, Inbox> inboxes_;                // by key
  // The inboxes of the BRPOP under way, and those it was kicked for (the next one has them).
  std::unordered_set<std::string> in_brpop_;
  // Wake-ups popped before their waiter listened (by wake list): a promotion between a first
  // call's reply and its subscribe(), or between a delivered wake-up and rearm().
  std::unordered_map<std::string, Unclaimed> unclaimed_;
  bool stop_ = false;
  bool retired_ = false;    // the thread ended, idle (thread_ is still to be joined)
  bool listening_ = false;  // a BRPOP is under way with the keys it had when it began
  int fd_ = -1;             // the socket a BRPOP waits on, for stop() to shut down
  bool cut_ = false;        // the last BRPOP was sent, and its reply never came (thread only)
  std::vector<std::function<void()>> due_hooks_;  // to call after this round (thread only)
  std::thread thread_;
};

}  // namespace fairsem::detail
