#pragma once

// A Client's watchdog: one thread that renews the held permits of every semaphore watched, each
// at its own interval, on a connection of its own per cluster slot (so renewals never wait for
// the pool). Internal.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "fairsem/connection_options.hpp"
#include "fairsem/impl/connection.hpp"
#include "fairsem/impl/discovery.hpp"

namespace fairsem::detail {

class SemaphoreCore;

class Watchdog : public std::enable_shared_from_this<Watchdog> {
 public:
  /// Starts nothing yet: the thread starts with the first semaphore watched.
  Watchdog(ConnectionOptions options, std::shared_ptr<Discovery> discovery);
  /// stop().
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// From now on renews `core`'s held permits every `interval` (the thread starts with the
  /// first semaphore watched; throws std::system_error if it cannot). Watching the same
  /// semaphore again changes nothing; a semaphore destroyed is no longer watched.
  void watch(const std::shared_ptr<SemaphoreCore>& core, std::chrono::milliseconds interval);
  /// Stops the thread after the round under way and joins it; on the thread itself (the last
  /// reference to the Client dropped in a renewal's callback) parks it instead
  /// (thread_reaper.hpp). Nothing is renewed afterwards.
  void stop() noexcept;

 private:
  using Clock = std::chrono::steady_clock;
  struct Watched {
    std::weak_ptr<SemaphoreCore> core;
    const SemaphoreCore* key;  // identity only, never dereferenced
    std::chrono::milliseconds interval;
    Clock::time_point next;
  };
  /// The thread's connection per slot, and whether it ever had one (a new one after that is a
  /// reconnect).
  struct SlotConnection {
    std::unique_ptr<Connection> conn;
    bool connected = false;
  };

  static void run(const std::weak_ptr<Watchdog>& weak, Watchdog* self);
  /// One round for `core`: a connection of its slot (new in place of a broken one, counted as
  /// a reconnect of `core`), then its permits renewed.
  void renew(SemaphoreCore& core, std::unordered_map<int, SlotConnection>& connections);

  const ConnectionOptions options_;
  const std::shared_ptr<Discovery> discovery_;

  std::mutex mu_;  // guards watched_, generation_, stop_, thread_
  std::condition_variable cv_;
  std::vector<Watched> watched_;
  std::uint64_t generation_ = 0;  // counts watch() calls, so that the thread sees them
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace fairsem::detail
