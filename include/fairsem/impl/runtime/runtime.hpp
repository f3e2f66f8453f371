#pragma once

// What a Client shares among its semaphores, each part a unit of its own, handed to its callers
// as it is: the options, the Discovery of a Cluster or Sentinel deployment, the connection pool
// (connection_pool.hpp), the worker threads (executor.hpp), the wake-up path of waiting
// acquires (waker.hpp, one per node), the watchdog that renews held permits (watchdog.hpp), the
// admission lines (admission.hpp) and the count of releases handed to the workers. Internal.

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "fairsem/client.hpp"
#include "fairsem/connection_options.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/net/discovery.hpp"
#include "fairsem/impl/net/per_node.hpp"
#include "fairsem/impl/renewal/watchdog.hpp"
#include "fairsem/impl/runtime/admission.hpp"
#include "fairsem/impl/runtime/call_batcher.hpp"
#include "fairsem/impl/runtime/connection_pool.hpp"
#include "fairsem/impl/threads/executor.hpp"
#include "fairsem/impl/threads/fork.hpp"
#include "fairsem/impl/wake/waker.hpp"

namespace fairsem::detail {

class SemaphoreCore;

class Runtime : public std::enable_shared_from_this<Runtime> {
 public:
  /// Validates the options (InvalidArgument); connects nothing.
  Runtime(ConnectionOptions options, ClientOptions client_options);
  /// Stops the wakers, then the watchdog; the executor's threads stop as it is destroyed.
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const ConnectionOptions& options() const noexcept { return options_; }
  /// Cluster and Sentinel: where connections go (shared by all of them); null standalone.
  const std::shared_ptr<Discovery>& discovery() const noexcept { return discovery_; }

  /// The process the Client belongs to (fork.hpp): its pool's.
  const OwnerProcess& owner() const noexcept { return pool_.owner(); }

  /// The connections of script calls; in a child made by fork(), taking one throws
  /// ForkedProcessError: every call to Redis takes one.
  ConnectionPool& pool() noexcept { return pool_; }
  /// Runs `script` as conn.eval() does; with ClientOptions::batch_calls, in a batch with the
  /// calls other threads make to the same node (CallBatcher), unless `conn` has a deadline.
  Reply eval(Connection& conn, const Script& script, const Args& keys, const Args& args,
             bool* batched = nullptr);
  /// A new connection (not the pool's) to each master: the server, the master the sentinels
  /// name, each master of a Cluster (from a fresh CLUSTER SLOTS). For what walks every node
  /// (listings, function libraries). Throws ForkedProcessError in a child made by fork().
  std::vector<Connection> master_connections() const;
  /// The worker threads of asynchronous acquires.
  Executor& executor() noexcept { return executor_; }

  /// The line in which the requests of the semaphore whose owner key is `key` reach Redis
  /// (admission.hpp): one for every handle of that semaphore opened through this Client, as
  /// long as one of them holds it.
  std::shared_ptr<Admission> admission(const std::string& key);

  /// ClientOptions::release_in_background.
  bool release_in_background() const noexcept { return release_in_background_; }
  /// ClientOptions::metrics_observer.
  const std::shared_ptr<MetricsObserver>& metrics_observer() const noexcept {
    return metrics_observer_;
  }
  /// Runs `release` (a task that releases the Permit it holds) on a worker thread, counted as
  /// pending until it has run and let go of what it held. Throws std::system_error if no
  /// worker thread can start (nothing is counted then).
  void post_release(Executor::Task release);
  /// Returns once no release posted by post_release is pending. Does not wait on fairsem's
  /// own threads, nor while this thread holds a pool connection: the wait could be for itself.
  void wait_for_releases() noexcept;

  /// The wake-up path of cluster slot `slot` (-1 outside a Cluster): the Waker of the node the
  /// slot map names for it when first asked, one thread for all the node's slots (one Waker
  /// in all outside a Cluster); the same Waker from then on while it serves the slot, so that
  /// one slot has one BRPOP. A lane closes when idle (ClientOptions::idle_timeout), and the
  /// thread with the last; slots and wakers nobody waits on are forgotten as more are used.
  std::shared_ptr<Waker> waker(int slot);

  /// The renewals of held permits.
  Watchdog& watchdog() noexcept { return *watchdog_; }

 private:
  const ConnectionOptions options_;
  const std::shared_ptr<Discovery> discovery_;
  ConnectionPool pool_;
  const bool batch_calls_;
  std::mutex batchers_mu_;
  std::unordered_map<std::string, std::unique_ptr<CallBatcher>> batchers_;  // by node endpoint
  Executor executor_;
  // Shared with its thread, which keeps it alive through a round (a renewal's callback may
  // drop the last reference to the Client).
  const std::shared_ptr<Watchdog> watchdog_;

  std::mutex admissions_mu_;
  std::unordered_map<std::string, std::weak_ptr<Admission>> admissions_;
  std::size_t admissions_sweep_at_ = 64;  // entries of handles all gone are dropped then

  /// The releases handed to the worker threads and not done yet. Shared with their tasks: the
  /// last one may run when the Runtime is gone (its permit held the last reference).
  struct PendingReleases {
    std::mutex mu;
    std::condition_variable cv;
    std::size_t count = 0;
  };
  const bool release_in_background_;
  const std::shared_ptr<MetricsObserver> metrics_observer_;
  const std::shared_ptr<PendingReleases> releases_ = std::make_shared<PendingReleases>();

  const std::chrono::milliseconds idle_timeout_;
  const std::string client_id_;  // every waker's: what names this Client's inboxes
  std::mutex wakers_mu_;
  PerNode<Waker> wakers_{discovery_};                            // by node (see waker())
  std::unordered_map<int, std::shared_ptr<Waker>> slot_wakers_;  // by slot: the one given
  const std::shared_ptr<WakerGroup> waker_group_ = std::make_shared<WakerGroup>();
  std::size_t wakers_sweep_at_ = 64;  // slots and wakers idle and unused are dropped then
};

}  // namespace fairsem::detail
