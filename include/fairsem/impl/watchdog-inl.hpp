#pragma once

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/thread_reaper.hpp"
#include "fairsem/impl/watchdog.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "fairsem/impl/semaphore_core.hpp"

namespace fairsem::detail {

FAIRSEM_INLINE Watchdog::Watchdog(ConnectionOptions options, std::shared_ptr<Discovery> discovery)
    : options_(std::move(options)), discovery_(std::move(discovery)) {}

FAIRSEM_INLINE Watchdog::~Watchdog() { stop(); }

FAIRSEM_INLINE void Watchdog::stop() noexcept {
  std::thread thread;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    thread = std::move(thread_);
  }
  cv_.notify_all();
  // Stopped on its own thread (a renewal's callback dropped the last reference to the Client):
  // that thread is parked, sees stop_ or its Watchdog gone, and leaves.
  join_or_park(thread);
}

FAIRSEM_INLINE void Watchdog::watch(const std::shared_ptr<SemaphoreCore>& core,
                                    std::chrono::milliseconds interval) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Watched& w : watched_) {
    if (w.key == core.get() && !w.core.expired()) return;
  }
  // The thread first: if it cannot start, nothing is left watched that nobody renews.
  if (!thread_.joinable() && !stop_) thread_ = std::thread(&Watchdog::run, weak_from_this(), this);
  watched_.push_back({core, core.get(), interval, Clock::now() + interval});
  ++generation_;
  cv_.notify_all();
}

FAIRSEM_INLINE void Watchdog::run(const std::weak_ptr<Watchdog>& weak, Watchdog* self) {
  mark_as_fairsems_thread();
  std::unordered_map<int, SlotConnection> connections;
  std::unique_lock<std::mutex> lock(self->mu_);
  for (;;) {
    if (self->stop_) return;
    auto& watched = self->watched_;
    watched.erase(std::remove_if(watched.begin(), watched.end(),
                                 [](const Watched& w) { return w.core.expired(); }),
                  watched.end());
    const std::uint64_t generation = self->generation_;
    const auto changed = [&] { return self->stop_ || self->generation_ != generation; };
    if (watched.empty()) {
      self->cv_.wait(lock, changed);
      continue;
    }
    const auto next =
        std::min_element(watched.begin(), watched.end(), [](const Watched& a, const Watched& b) {
          return a.next < b.next;
        })->next;
    if (Clock::now() < next) {
      // Woken early for a semaphore newly watched: its first round may come sooner.
      self->cv_.wait_until(lock, next, changed);
      continue;
    }
    // Kept alive for the round: a callback may drop the last reference to the Client.
    std::shared_ptr<Watchdog> alive = weak.lock();
    if (!alive) return;  // being destroyed elsewhere; its destructor sets stop_ and joins
    const auto round = Clock::now();
    std::vector<std::shared_ptr<SemaphoreCore>> due;
    for (Watched& w : watched) {
      if (w.next > round) continue;
      w.next = round + w.interval;  // the cadence holds however long the round takes
      if (auto core = w.core.lock()) due.push_back(std::move(core));
    }
    lock.unlock();
    for (const auto& core : due) self->renew(*core, connections);
    due.clear();
    alive.reset();
    // If that was the last reference, the destructor ran on this thread and parked it.
    if (weak.expired()) return;
    lock.lock();
  }
}

FAIRSEM_INLINE void Watchdog::renew(SemaphoreCore& core,
                                    std::unordered_map<int, SlotConnection>& connections) {
  const auto permits = core.held_permits();
  if (permits.empty()) return;
  SlotConnection& w = connections[core.slot()];
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

}  // namespace fairsem::detail
