#pragma once

// What a Client shares among its semaphores: the options, the Discovery of a Cluster or
// Sentinel deployment, a pool of idle connections per cluster slot, the wake-up path of waiting
// acquires (waker.hpp, one per slot), and one watchdog thread that renews every watched
// semaphore's permits at that semaphore's own interval. Internal.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "fairsem/client.hpp"
#include "fairsem/connection_options.hpp"
#include "fairsem/impl/admission.hpp"
#include "fairsem/impl/connection.hpp"
#include "fairsem/impl/discovery.hpp"
#include "fairsem/impl/executor.hpp"
#include "fairsem/impl/waker.hpp"

namespace fairsem::detail {

class SemaphoreCore;

class Runtime : public std::enable_shared_from_this<Runtime> {
 public:
  /// Validates the options (InvalidArgument); connects nothing.
  Runtime(ConnectionOptions options, ClientOptions client_options);
  /// Stops the watchdog (joined, or parked when the last reference is dropped on it).
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const ConnectionOptions& options() const noexcept { return options_; }
  /// Cluster and Sentinel: where connections go (shared by all of them); null standalone.
  const std::shared_ptr<Discovery>& discovery() const noexcept { return discovery_; }

  /// A connection for commands on cluster hash slot `slot` (-1 standalone): an idle one from the
  /// pool, else a new one (which may throw what connecting throws), waiting while
  /// max_connections are taken unless this thread holds one already. Give it back with
  /// give_back, on the same thread.
  std::unique_ptr<Connection> take(int slot);
  /// Back to the pool (closed if the pool of its slot holds enough idle ones).
  void give_back(std::unique_ptr<Connection> conn) noexcept;
  /// True while this thread holds a pool connection (of any Client): waiting then for work that
  /// needs one could wait for ever at max_connections.
  static bool this_thread_holds_a_connection() noexcept;

  /// The worker threads of asynchronous acquires.
  Executor& executor() noexcept { return executor_; }

  /// The line in which the requests of the semaphore whose owner key is `key` reach Redis
  /// (admission.hpp): one for every handle of that semaphore opened through this Client, as
  /// long as one of them holds it.
  std::shared_ptr<Admission> admission(const std::string& key);

  /// ClientOptions::release_in_background.
  bool release_in_background() const noexcept { return release_in_background_; }
  /// Runs `release` (a task that releases the Permit it holds) on a worker thread, counted as
  /// pending until it has run and let go of what it held. Throws std::system_error if no
  /// worker thread can start (nothing is counted then).
  void post_release(Executor::Task release);
  /// Returns once no release posted by post_release is pending. Does not wait on fairsem's
  /// own threads, nor while this thread holds a pool connection: the wait could be for itself.
  void wait_for_releases() noexcept;

  /// The wake-up path of cluster slot `slot` (-1 standalone): one per slot, made on first use,
  /// with a kick list under `wake_prefix` (the wake-list prefix of the semaphore that asks
  /// first, so that the user may write it).
  std::shared_ptr<Waker> waker(int slot, const std::string& wake_prefix);

  /// From now on the watchdog renews `core`'s held permits every `interval` (the thread starts
  /// with the first semaphore watched; throws std::system_error if it cannot). Watching the
  /// same semaphore again changes nothing; a semaphore destroyed is no longer watched.
  void watch(const std::shared_ptr<SemaphoreCore>& core, std::chrono::milliseconds interval);

 private:
  struct Watched {
    std::weak_ptr<SemaphoreCore> core;
    const SemaphoreCore* key;  // identity only, never dereferenced
    std::chrono::milliseconds interval;
    std::chrono::steady_clock::time_point next;
  };
  /// The watchdog's connection per slot, and whether it ever had one (a new one after that is a
  /// reconnect).
  struct WatchdogConnection {
    std::unique_ptr<Connection> conn;
    bool connected = false;
  };

  static void watchdog_main(const std::weak_ptr<Runtime>& weak, Runtime* runtime);
  /// One round for `core`: a connection of its slot (new in place of a broken one, counted as
  /// a reconnect of `core`), then its permits renewed.
  void renew(SemaphoreCore& core, std::unordered_map<int, WatchdogConnection>& connections);

  /// With pool_mu_ held: closes an idle connection of any slot; false if there is none.
  bool close_an_idle_one();

  const ConnectionOptions options_;
  const std::size_t max_connections_;
  const std::shared_ptr<Discovery> discovery_;

  std::mutex pool_mu_;  // guards idle_ and open_
  std::condition_variable pool_cv_;
  std::unordered_map<int, std::vector<std::unique_ptr<Connection>>> idle_;
  std::size_t open_ = 0;  // connections of the pool, idle or taken

  Executor executor_;

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
  const std::shared_ptr<PendingReleases> releases_ = std::make_shared<PendingReleases>();

  std::mutex wakers_mu_;
  std::unordered_map<int, std::shared_ptr<Waker>> wakers_;

  std::mutex mu_;  // guards watched_, generation_, stop_, watchdog_
  std::condition_variable cv_;
  std::vector<Watched> watched_;
  std::uint64_t generation_ = 0;  // counts watch() calls, so that the watchdog sees them
  bool stop_ = false;
  std::thread watchdog_;
};

}  // namespace fairsem::detail
