#pragma once

// A Client's watchdog: renews the held permits of every semaphore watched, each at its own
// interval, in one renewal lane per node (the server; in a Cluster, each master): a thread with
// connections of its own, so that a node that hangs or a renewal that waits delays only the
// permits on that node. Each renewal call is bounded by the leases it extends. The callbacks a
// renewal makes (on_lost, on_renew_failure, the logger) go to the callback thread (notifier.hpp)
// and never hold up a lane. Internal.

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "fairsem/connection_options.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/net/discovery.hpp"
#include "fairsem/impl/net/per_node.hpp"
#include "fairsem/impl/threads/notifier.hpp"
#include "fairsem/impl/threads/owned_thread.hpp"

namespace fairsem::detail {

class SemaphoreCore;

/// How soon a semaphore whose renewal failed is renewed again: a quarter of its interval, so
/// that two failures in a row (a failover that takes a while) leave several tries before a
/// lease of three intervals runs out, instead of one at the very deadline. Also how often a
/// renewal call that is not answered is reported as failed while it waits
/// (semaphore_core_renewal-inl.hpp): either way, a failing semaphore reports about four times per
/// interval.
inline std::chrono::milliseconds renewal_retry_delay(std::chrono::milliseconds interval) {
  return std::max(std::chrono::milliseconds(1), interval / 4);
}

class Watchdog : public std::enable_shared_from_this<Watchdog> {
 public:
  /// Starts nothing yet: a lane starts with the first semaphore watched on its node.
  /// A lane's connection that renews nothing for `idle_timeout` (ClientOptions::idle_timeout)
  /// is closed.
  Watchdog(ConnectionOptions options, std::shared_ptr<Discovery> discovery,
           std::chrono::milliseconds idle_timeout);
  /// stop().
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// From now on renews `core`'s held permits every `interval`, in the lane of the node that
  /// serves its slot (started now if there is none; throws std::system_error if it cannot).
  /// Watching the same semaphore again changes nothing; a semaphore destroyed is no longer
  /// watched. Must be called on a thread holding a reference to this Watchdog.
  void watch(const std::shared_ptr<SemaphoreCore>& core, std::chrono::milliseconds interval);
  /// Stops every lane after the round under way and joins it (on a lane's own thread: parks
  /// it, thread_reaper.hpp), then the callback thread. Nothing is renewed afterwards.
  void stop() noexcept;

 private:
  using Clock = std::chrono::steady_clock;
  struct Watched {
    std::weak_ptr<SemaphoreCore> core;
    const SemaphoreCore* key;  // identity only, never dereferenced
    int slot;
    std::chrono::milliseconds interval;
    Clock::time_point next;
  };
  /// One node's renewals: its thread and what it renews. Guarded by mu_, but for `key`.
  struct Lane {
    explicit Lane(std::string node) : key(std::move(node)) {}
    const std::string key;  // the node's endpoint ("" for the only node, or one not known yet)
    OwnedThread thread;     // retires when nothing is left to renew
    std::condition_variable cv;
    std::vector<Watched> watched;
    std::uint64_t generation = 0;  // counts the entries added, so that the thread sees them
  };
  /// A lane's one connection, which serves every slot of its node (Connection::use_slot), and
  /// whether it ever had one (a new one after that is a reconnect).
  struct LaneConnection {
    std::unique_ptr<Connection> conn;
    bool connected = false;
    Clock::time_point used;  // by the last renewal that had permits to renew
  };

  /// The lane for `key`, started if it is not running. Caller holds mu_, and lets go of
  /// `ended` (the thread of a lane that retired and starts again) after it.
  Lane& lane_for(const std::string& key, std::vector<OwnedThread>& ended);
  /// Adds `w` to `lane` and wakes its thread. Caller holds mu_.
  static void add(Lane& lane, Watched w);
  /// The entries of `lane` due at `round`: those that route to another node now are handed to
  /// that node's lane instead. Caller holds mu_, and lets go of `ended` after it (lane_for).
  std::vector<std::shared_ptr<SemaphoreCore>> take_due(Lane& lane, Clock::time_point round,
                                                       std::vector<OwnedThread>& ended);

  static void run(const std::shared_ptr<Watchdog>& self, const std::shared_ptr<Lane>& lane);
  /// One round for `core`: its permits renewed on the lane's connection `w` (made under their
  /// leases' deadline when there is none or it broke). False when a permit still held was not
  /// renewed.
  bool renew(SemaphoreCore& core, LaneConnection& w);
  /// The entries of `lane` for `failed` (their renewal failed at `now`) are due again after
  /// renewal_retry_delay, if that comes before their interval. Caller holds mu_.
  static void retry_soon(Lane& lane, const std::vector<const SemaphoreCore*>& failed,
                         Clock::time_point now);

  const ConnectionOptions options_;
  const std::shared_ptr<Discovery> discovery_;
  const std::chrono::milliseconds idle_timeout_;
  const bool per_slot_;  // Cluster: lanes per node, each semaphore routed by its slot
  Notifier notifier_;

  std::mutex mu_;        // guards lanes_, stop_ and every Lane
  PerNode<Lane> lanes_;  // by node (PerNode::route)
  bool stop_ = false;
};

}  // namespace fairsem::detail
