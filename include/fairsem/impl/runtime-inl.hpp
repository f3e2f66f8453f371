#pragma once

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/runtime.hpp"
#include "fairsem/impl/thread_reaper.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <utility>

#include "fairsem/client.hpp"
#include "fairsem/impl/semaphore_core.hpp"

namespace fairsem {

namespace detail {

namespace runtime_helpers {

// Idle connections kept per cluster slot (standalone: in all); more are closed when returned.
inline constexpr std::size_t kMaxIdleConnections = 8;

// Pool connections the current thread holds (of any Client): one that holds some never waits.
FAIRSEM_INLINE thread_local std::size_t held_by_this_thread = 0;

}  // namespace runtime_helpers

FAIRSEM_INLINE Runtime::Runtime(ConnectionOptions options, ClientOptions client_options)
    : options_((options.validate(), std::move(options))),
      max_connections_((client_options.validate(), client_options.max_connections)),
      discovery_(options_.routed() ? std::make_shared<Discovery>(options_) : nullptr),
      executor_(client_options.worker_threads),
      release_in_background_(client_options.release_in_background) {}

FAIRSEM_INLINE Runtime::~Runtime() {
  for (auto& entry : wakers_) entry.second->stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  // The last reference can be dropped on the watchdog thread itself (a permit released in
  // on_lost): that thread is parked, sees the Runtime gone and leaves without touching it again.
  join_or_park(watchdog_);
}

FAIRSEM_INLINE void Runtime::post_release(Executor::Task release) {
  {
    std::lock_guard<std::mutex> lock(releases_->mu);
    ++releases_->count;
  }
  auto done = [pending = releases_] {
    {
      std::lock_guard<std::mutex> lock(pending->mu);
      --pending->count;
    }
    pending->cv.notify_all();
  };
  try {
    executor_.post([release = std::move(release), done]() mutable {
      Executor::Task task = std::move(release);
      task();
      task = nullptr;  // the permit (and the semaphore it may keep alive) is let go of first
      done();
    });
  } catch (...) {
    done();
    throw;
  }
}

FAIRSEM_INLINE void Runtime::wait_for_releases() noexcept {
  if (on_fairsems_thread() || this_thread_holds_a_connection()) return;
  std::unique_lock<std::mutex> lock(releases_->mu);
  releases_->cv.wait(lock, [&] { return releases_->count == 0; });
}

FAIRSEM_INLINE bool Runtime::this_thread_holds_a_connection() noexcept {
  return runtime_helpers::held_by_this_thread > 0;
}

FAIRSEM_INLINE std::unique_ptr<Connection> Runtime::take(int slot) {
  std::unique_lock<std::mutex> lock(pool_mu_);
  for (;;) {
    const auto it = idle_.find(slot);
    if (it != idle_.end() && !it->second.empty()) {
      auto conn = std::move(it->second.back());
      it->second.pop_back();
      ++runtime_helpers::held_by_this_thread;
      return conn;
    }
    if (open_ < max_connections_ || runtime_helpers::held_by_this_thread > 0) break;
    // At the bound: an idle connection of another slot makes room, else one comes back.
    if (close_an_idle_one()) continue;
    pool_cv_.wait(lock);
  }
  ++open_;
  lock.unlock();
  try {
    auto conn = std::make_unique<Connection>(options_, discovery_, slot);
    ++runtime_helpers::held_by_this_thread;
    return conn;
  } catch (...) {
    lock.lock();
    --open_;
    pool_cv_.notify_one();
    throw;
  }
}

FAIRSEM_INLINE void Runtime::give_back(std::unique_ptr<Connection> conn) noexcept {
  if (!conn) return;
  --runtime_helpers::held_by_this_thread;
  std::unique_ptr<Connection> closing;
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    try {
      auto& idle = idle_[conn->slot()];
      if (idle.size() < runtime_helpers::kMaxIdleConnections) idle.push_back(std::move(conn));
    } catch (...) {
      // No memory for the pool's bookkeeping: the connection is closed instead.
    }
    if (conn) {
      closing = std::move(conn);
      --open_;
    }
  }
  pool_cv_.notify_one();
  // `closing` is closed here, outside the lock.
}

FAIRSEM_INLINE bool Runtime::close_an_idle_one() {
  for (auto& entry : idle_) {
    if (!entry.second.empty()) {
      entry.second.pop_back();
      --open_;
      return true;
    }
  }
  return false;
}

FAIRSEM_INLINE std::shared_ptr<Admission> Runtime::admission(const std::string& key) {
  std::lock_guard<std::mutex> lock(admissions_mu_);
  std::weak_ptr<Admission>& entry = admissions_[key];
  std::shared_ptr<Admission> admission = entry.lock();
  if (admission) return admission;
  admission = std::make_shared<Admission>(executor_);
  entry = admission;
  // A service that opens a semaphore per tenant must not keep an entry per name forever.
  if (admissions_.size() >= admissions_sweep_at_) {
    for (auto it = admissions_.begin(); it != admissions_.end();) {
      it = it->second.expired() ? admissions_.erase(it) : std::next(it);
    }
    admissions_sweep_at_ = std::max<std::size_t>(64, 2 * admissions_.size());
  }
  return admission;
}

FAIRSEM_INLINE std::shared_ptr<Waker> Runtime::waker(int slot, const std::string& wake_prefix) {
  std::lock_guard<std::mutex> lock(wakers_mu_);
  std::shared_ptr<Waker>& waker = wakers_[slot];
  if (!waker) {
    waker = std::make_shared<Waker>(options_, discovery_, slot, wake_prefix + "kick-" + random_id(),
                                    random_id());
  }
  return waker;
}

FAIRSEM_INLINE void Runtime::watch(const std::shared_ptr<SemaphoreCore>& core,
                                   std::chrono::milliseconds interval) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Watched& w : watched_) {
    if (w.key == core.get() && !w.core.expired()) return;
  }
  // The thread first: if it cannot start, nothing is left watched that nobody renews.
  if (!watchdog_.joinable()) {
    watchdog_ = std::thread(&Runtime::watchdog_main, weak_from_this(), this);
  }
  watched_.push_back({core, core.get(), interval, Clock::now() + interval});
  ++generation_;
  cv_.notify_all();
}

FAIRSEM_INLINE void Runtime::watchdog_main(const std::weak_ptr<Runtime>& weak, Runtime* runtime) {
  mark_as_fairsems_thread();
  std::unordered_map<int, WatchdogConnection> connections;
  std::unique_lock<std::mutex> lock(runtime->mu_);
  for (;;) {
    if (runtime->stop_) return;
    auto& watched = runtime->watched_;
    watched.erase(std::remove_if(watched.begin(), watched.end(),
                                 [](const Watched& w) { return w.core.expired(); }),
                  watched.end());
    const std::uint64_t generation = runtime->generation_;
    const auto changed = [&] { return runtime->stop_ || runtime->generation_ != generation; };
    if (watched.empty()) {
      runtime->cv_.wait(lock, changed);
      continue;
    }
    const auto next =
        std::min_element(watched.begin(), watched.end(), [](const Watched& a, const Watched& b) {
          return a.next < b.next;
        })->next;
    if (Clock::now() < next) {
      // Woken early for a semaphore newly watched: its first round may come sooner.
      runtime->cv_.wait_until(lock, next, changed);
      continue;
    }
    std::shared_ptr<Runtime> self = weak.lock();
    if (!self) return;  // being destroyed elsewhere; the destructor sets stop_ and joins
    const auto round = Clock::now();
    std::vector<std::shared_ptr<SemaphoreCore>> due;
    for (Watched& w : watched) {
      if (w.next > round) continue;
      w.next = round + w.interval;  // the cadence holds however long the round takes
      if (auto core = w.core.lock()) due.push_back(std::move(core));
    }
    lock.unlock();
    for (const auto& core : due) runtime->renew(*core, connections);
    due.clear();
    self.reset();
    // If that was the last reference, the destructor ran on this thread and parked it.
    if (weak.expired()) return;
    lock.lock();
  }
}

FAIRSEM_INLINE void Runtime::renew(SemaphoreCore& core,
                                   std::unordered_map<int, WatchdogConnection>& connections) {
  const auto permits = core.held_permits();
  if (permits.empty()) return;
  WatchdogConnection& w = connections[core.slot()];
  if (!w.conn || w.conn->broken()) {
    try {
      w.conn = std::make_unique<Connection>(options_, discovery_, core.slot());
      if (std::exchange(w.connected, true)) MetricCounters::add(*core.reconnect_counter());
    } catch (const std::exception& e) {
      w.conn.reset();
      core.log(LogLevel::warning,
               fmt::format("fairsem: {}: watchdog cannot connect: {}", core.where(), e.what()));
    }
  }
  // Reconnects during the round count for the semaphore whose permits it renews.
  if (w.conn) w.conn->count_reconnects(core.reconnect_counter());
  core.renew_round(w.conn.get(), permits);
}

}  // namespace detail

FAIRSEM_INLINE void ClientOptions::validate() const {
  if (max_connections < 1) {
    throw InvalidArgument(
        fmt::format("fairsem: max_connections must be at least 1, got {}", max_connections));
  }
  if (worker_threads < 1) {
    throw InvalidArgument(
        fmt::format("fairsem: worker_threads must be at least 1, got {}", worker_threads));
  }
}

FAIRSEM_INLINE Client::Client(ConnectionOptions connection, ClientOptions options)
    : runtime_(std::make_shared<detail::Runtime>(std::move(connection), options)) {}

FAIRSEM_INLINE Client::Client(const Client&) = default;
FAIRSEM_INLINE Client::Client(Client&&) noexcept = default;
FAIRSEM_INLINE Client& Client::operator=(const Client&) = default;
FAIRSEM_INLINE Client& Client::operator=(Client&&) noexcept = default;

FAIRSEM_INLINE Client::~Client() {
  if (runtime_) runtime_->wait_for_releases();
}

FAIRSEM_INLINE const ConnectionOptions& Client::connection() const noexcept {
  return runtime_->options();
}

}  // namespace fairsem
