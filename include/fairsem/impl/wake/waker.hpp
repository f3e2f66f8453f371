#pragma once

// The Client's wake-up path: one thread per node (one in all on a single server or through
// Sentinel) waits, with one BRPOP per cluster slot over the Client's inbox of every semaphore of
// that slot it waits on, for the wake-ups the semaphore scripts push there ("ID MESSAGE"), and
// hands each to the waiting request it is for. The keys of a BRPOP follow the semaphores waited
// on, never the number of waiters; a waiting acquire holds no connection of its own. A BRPOP
// takes the keys of one slot only, so a Cluster Client has a connection (a lane) per slot
// waited on; one thread keeps every lane of its node, reading whichever answers (poll(2)).
// Internal. Defined in two files, one per facet: waker-inl.hpp (the subscriptions) and
// waker_loop-inl.hpp (its thread).

#include <array>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "fairsem/connection_options.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/net/discovery.hpp"
#include "fairsem/impl/threads/owned_thread.hpp"
#include "fairsem/impl/wake/wake_subscription.hpp"
#include "fairsem/impl/wake/waker_group.hpp"

namespace fairsem::detail {

namespace waker_helpers {

// How long one BRPOP waits. A new wake list is added at once by a kick; this bounds how long a
// lost kick (or a wake list no longer waited for) can go unnoticed.
inline constexpr auto kListenSeconds = std::chrono::seconds(1);
// How long an unpopped kick stays (only when the client is gone before its BRPOP popped it).
inline constexpr auto kKickLifetime = std::chrono::seconds(10);
// How long a semaphore's inbox stays in the BRPOP after its last waiter: a semaphore whose
// queue empties and fills again now and then needs no kick each time.
inline constexpr auto kInboxLinger = std::chrono::seconds(10);
// What names a semaphore's inbox among its wake lists (common.lua's INBOX).
inline constexpr std::string_view kInboxMark = "{inbox}";
// How long a wake-up popped before its waiter listened is kept for it (the waiter subscribes
// right after its call's reply; it polls anyway within one poll interval), and how many are.
inline constexpr auto kUnclaimedLifetime = std::chrono::seconds(5);
inline constexpr std::size_t kMaxUnclaimed = 10'000;
// After a refused BRPOP or a failed reconnect: waiters poll meanwhile.
inline constexpr auto kRetryPause = std::chrono::milliseconds(200);

}  // namespace waker_helpers

class Waker : public std::enable_shared_from_this<Waker> {
 public:
  /// Routed by `discovery` (null standalone). `kick_id` names the kick lists (random, so that
  /// nobody else uses them): a lane's is its first semaphore's wake prefix + "kick-" + kick_id.
  /// `client`: the name of this waker's inboxes (random; no permit id can be one; the same for
  /// every waker of a Client, so that a waker made again routes as the one it replaces). A lane
  /// nobody has listened through for `idle_timeout` (ClientOptions::idle_timeout) closes its
  /// connection; with no lane left, the thread ends; the next subscription starts them again.
  /// `group`: the Client's wakers, this one among them (null: none other).
  Waker(ConnectionOptions options, std::shared_ptr<Discovery> discovery, std::string kick_id,
        std::string client, std::chrono::milliseconds idle_timeout,
        std::shared_ptr<WakerGroup> group = nullptr);
  /// Stops the thread and joins it.
  ~Waker();
  Waker(const Waker&) = delete;
  Waker& operator=(const Waker&) = delete;

  /// What the semaphore scripts are told (their CLIENT argument) so that they push a waiter's
  /// wake-ups to this waker's inbox.
  const std::string& client() const noexcept { return client_; }
  /// The inbox of the semaphore whose wake lists are under `wake_prefix`.
  std::string inbox(const std::string& wake_prefix) const;
  /// Starts listening for the wake-ups of the request whose wake list is `wake_prefix` + `id`,
  /// which come through inbox(wake_prefix), in cluster slot `slot` (-1 outside a Cluster); when
  /// that inbox is new to a BRPOP under way, tells it so through `conn` (a pool connection in
  /// the same slot; if that fails, its next BRPOP, at most a second later, includes the inbox).
  /// A BRPOP of that lane cut off since `since` (when the call that queued the request was
  /// sent) may have popped its promotion: the subscription starts interrupted, and its waiter
  /// polls at once. Throws std::system_error if the thread cannot start.
  std::unique_ptr<WakeSubscription> subscribe(
      int slot, const std::string& wake_prefix, const std::string& id, Connection& conn,
      std::function<void()> hook = {},
      std::chrono::steady_clock::time_point since = std::chrono::steady_clock::time_point::max());
  /// Stops the thread (the destructor does); subscriptions left wait out their time.
  void stop() noexcept;
  /// Whether its thread runs (and holds connections): from the first subscription until every
  /// lane has been idle for the idle timeout, or stopped.
  bool running() const;
  /// Whether it has a lane for `slot`: listened through within the idle timeout.
  bool serves(int slot) const;

 private:
  friend struct WakerPeer;  // tests/support/waker_peer.hpp: its lanes
  friend class WakeSubscription;
  friend class WakerGroup;
  /// One semaphore's inbox: how many subscriptions listen through it, and since when none.
  struct Inbox {
    std::size_t listed = 0;
    std::chrono::steady_clock::time_point idle_since;
  };
  /// One slot's BRPOP: its keys, its connection, where it stands.
  struct Lane {
    Lane(int lane_slot, std::string kick) : slot(lane_slot), kick_key(std::move(kick)) {}
    const int slot;
    const std::string kick_key;  // first of its keys: a push there ends a BRPOP under way
    // Guarded by mu_.
    std::unordered_map<std::string, Inbox> inboxes;  // by key
    std::size_t listed = 0;                          // subscriptions through its inboxes
    std::chrono::steady_clock::time_point idle_since;
    // The inboxes of the BRPOP under way, and those it was kicked for (the next one has them).
    std::unordered_set<std::string> in_brpop;
    bool listening = false;  // a BRPOP is under way with the keys it had when it began
    // When a BRPOP of this lane was last cut off (whatever it popped lost with its reply).
    std::chrono::steady_clock::time_point cut_at;
    // The thread's own.
    std::unique_ptr<Connection> conn;
    std::vector<std::string> keys;  // of the BRPOP under way
    bool sent = false;              // a BRPOP was sent; its reply is due by reply_by
    std::chrono::steady_clock::time_point reply_by;
    std::chrono::steady_clock::time_point resume_at;  // a pause after a failure ends then
    bool failed_before = false;                       // its last BRPOP (or connect) failed too
  };
  /// A wake-up popped while no subscription listened for it, and when.
  struct Unclaimed {
    std::string message;
    std::chrono::steady_clock::time_point at;
  };
  using SubIt = std::unordered_multimap<std::string, WakeSubscription*>::iterator;

  // waker-inl.hpp: the subscriptions.
  /// Adds `sub` to its lane's next BRPOP, and kicks a BRPOP under way that lacks its inbox (or
  /// wakes the thread for a lane not listening); or hands it the wake-up that came for it
  /// before it listened, or else marks it interrupted if the lane was cut off since `since`.
  void list(WakeSubscription& sub, Connection& conn, std::chrono::steady_clock::time_point since);
  /// With mu_ held: `sub` (at `it` in subs_) gets {its wake list, `message`} and stops listening;
  /// its waiter wakes. True when its hook is due.
  bool hand_over(SubIt it, std::string message);
  /// With mu_ held: keeps a wake-up nobody listens for (yet) for kUnclaimedLifetime, for a
  /// waiter that subscribes after its promotion was popped.
  void keep_unclaimed(std::string key, std::string message);
  /// With mu_ held: forgets the unclaimed wake-ups kept kUnclaimedLifetime or longer.
  void forget_unclaimed(std::chrono::steady_clock::time_point now);
  void unsubscribe(const WakeSubscription& sub) noexcept;
  /// With mu_ held: `sub` leaves subs_ (at `it`); its inbox is kept a while after its last.
  void unlist(SubIt it);
  /// A BRPOP's reply {inbox, "ID MESSAGE"} to the subscription it is for, if any (of this
  /// waker's, else of another of the group's); otherwise kept unclaimed.
  void deliver(Reply reply);
  /// WakerGroup::offer, this waker's part: true if a subscription listening for `key` took it.
  bool take_offer(const std::string& key, const std::string& message);
  /// WakerGroup::claim, this waker's part.
  std::optional<std::string> take_unclaimed(const std::string& key);
  /// After list(): a wake-up for `sub` that another waker of the group kept is handed to it.
  void claim_from_group(WakeSubscription& sub);
  /// Sets what `mark` sets on every subscription of lane `slot` and wakes their waiters; their
  /// hooks are due.
  void notify_lane(int slot, const std::function<void(WakeSubscription&)>& mark);
  /// Calls the hooks due (without the lock), keeping this Waker alive meanwhile. False when this
  /// Waker is gone: destroyed by a hook (the runtime's last reference), or being destroyed.
  bool call_due_hooks(const std::weak_ptr<Waker>& weak);
  /// Ends the thread's poll(2) at once (a lane to start, or stop()).
  void poke() noexcept;

  // waker_loop-inl.hpp: the thread.
  void run();
  /// With mu_ held: the lanes due to send a BRPOP now (their keys collected), and when the
  /// next one will be; lanes idle for the idle timeout are closed (their connections moved to
  /// `closing`, to close without the lock). False when the thread is to end.
  bool plan(std::vector<Lane*>& due, std::chrono::steady_clock::time_point& next,
            std::vector<std::unique_ptr<Connection>>& closing);
  /// With mu_ held: the kick list, then every inbox of `lane` listened through or idle for less
  /// than kInboxLinger (the others are forgotten).
  static void collect_keys(Lane& lane);
  /// Connects `lane` (if need be) and sends its BRPOP.
  void send(Lane& lane);
  /// Reads what `lane`'s socket has; handles the reply once it is whole.
  void receive(Lane& lane);
  /// `lane`'s BRPOP (or its connect) failed; `cut`: a BRPOP may have been under way, so a
  /// wake-up it popped may be lost: its waiters poll at once, and it listens again at once
  /// (unless its last attempt failed too: then, as after any other failure, it pauses).
  void failed(Lane& lane, bool cut);
  /// A BRPOP's reply: a wake-up handed over, a redirection followed, a refusal reported.
  void handle(Lane& lane, Reply reply);
  /// Waits on the lanes under way and the poke pipe until `next` at the latest; reads what
  /// came, and fails the lanes whose reply is overdue.
  void wait(const std::vector<Lane*>& under_way, std::chrono::steady_clock::time_point next);

  const ConnectionOptions options_;
  const std::shared_ptr<Discovery> discovery_;
  const std::string kick_id_;
  const std::string client_;
  const std::string inbox_suffix_;  // "{inbox}" + client_
  const std::chrono::milliseconds idle_timeout_;
  const std::shared_ptr<WakerGroup> group_;  // called without mu_ held

  mutable std::mutex mu_;  // guards subs_, lanes_ (and what a Lane says), unclaimed_, stop_,
                           // thread_, results
  std::unordered_multimap<std::string, WakeSubscription*> subs_;  // by wake list
  // By slot. Lanes are added by list() and removed by the thread only, so that the thread may
  // use one without the lock (node-based: other lanes come and go without moving it).
  std::unordered_map<int, Lane> lanes_;
  // Wake-ups popped before their waiter listened (by wake list): a promotion between a first
  // call's reply and its subscribe(), or between a delivered wake-up and rearm().
  std::unordered_map<std::string, Unclaimed> unclaimed_;
  bool stop_ = false;
  std::array<int, 2> poke_{-1, -1};  // a pipe: a byte written ends the thread's poll(2)
  std::vector<std::function<void()>> due_hooks_;  // to call after this round (thread only)
  OwnedThread thread_;                            // retires when no lane is left
};

}  // namespace fairsem::detail
