#pragma once

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/renewal/watchdog.hpp"
#include "fairsem/impl/threads/thread_reaper.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "fairsem/impl/semaphore/semaphore_core.hpp"

namespace fairsem::detail {

namespace watchdog_helpers {

/// The earliest `next` of `watched` (not empty).
template <class Watched>
auto earliest(const std::vector<Watched>& watched) {
  return std::min_element(watched.begin(), watched.end(),
                          [](const Watched& a, const Watched& b) { return a.next < b.next; })
      ->next;
}

}  // namespace watchdog_helpers

FAIRSEM_INLINE Watchdog::Watchdog(ConnectionOptions options, std::shared_ptr<Discovery> discovery,
                                  std::chrono::milliseconds idle_timeout)
    : options_(std::move(options)),
      discovery_(std::move(discovery)),
      idle_timeout_(idle_timeout),
      // Sentinel: one master serves every slot, so one connection serves every semaphore.
      per_slot_(discovery_ && !discovery_->sentinel()),
      lanes_(discovery_) {}

FAIRSEM_INLINE Watchdog::~Watchdog() { stop(); }

FAIRSEM_INLINE void Watchdog::stop() noexcept {
  // Stopped on a lane's own thread (its round dropped the last reference to the Client): that
  // thread is parked, sees stop_ and leaves.
  stop_threads(
      mu_,
      [&](std::vector<OwnedThread>& ending) {
        stop_ = true;
        for (auto& entry : lanes_) {
          ending.push_back(entry.second->thread.take());
          entry.second->cv.notify_all();
        }
        lanes_.clear();
      },
      [] {});
  // Last: the lanes' rounds post to it. No callback is left queued (each holds its semaphore,
  // and so the Client, which is being destroyed).
  notifier_.stop();
}

FAIRSEM_INLINE Watchdog::Lane& Watchdog::lane_for(const std::string& key,
                                                  std::vector<OwnedThread>& ended) {
  std::shared_ptr<Lane>& lane = lanes_[key];
  const bool made = !lane;
  try {
    if (made) lane = std::make_shared<Lane>(key);
    // A lane that retired starts again; its thread that ended is let go of after the lock.
    ended.push_back(lane->thread.start([self = shared_from_this(), lane] { run(self, lane); }));
  } catch (...) {
    if (made && !(lane && lane->thread.running())) lanes_.erase(key);
    throw;
  }
  return *lane;
}

FAIRSEM_INLINE void Watchdog::add(Lane& lane, Watched w) {
  lane.watched.push_back(std::move(w));
  ++lane.generation;
  lane.cv.notify_all();
}

FAIRSEM_INLINE void Watchdog::watch(const std::shared_ptr<SemaphoreCore>& core,
                                    std::chrono::milliseconds interval) {
  std::vector<OwnedThread> ended;  // let go of after the lock
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return;
  for (auto it = lanes_.begin(); it != lanes_.end();) {
    // A lane that retired (nothing left to renew on its node) is joined now.
    if (it->second->thread.retired()) {
      ended.push_back(it->second->thread.take());
      it = lanes_.erase(it);
      continue;
    }
    for (const Watched& w : it->second->watched) {
      if (w.key == core.get() && !w.core.expired()) return;
    }
    ++it;
  }
  // Not known now (a slot map being asked for): the lane of unknown nodes, "", which hands it
  // on once its node is known.
  const std::string key = lanes_.route(core->slot()).value_or(std::string());
  // The lane first: if it cannot start, nothing is left watched that nobody renews.
  Lane& lane = lane_for(key, ended);
  add(lane, {core, core.get(), core->slot(), interval, Clock::now() + interval});
}

FAIRSEM_INLINE std::vector<std::shared_ptr<SemaphoreCore>> Watchdog::take_due(
    Lane& lane, Clock::time_point round, std::vector<OwnedThread>& ended) {
  std::vector<std::shared_ptr<SemaphoreCore>> due;
  for (auto it = lane.watched.begin(); it != lane.watched.end();) {
    if (it->next > round) {
      ++it;
      continue;
    }
    it->next = round + it->interval;  // the cadence holds however long the round takes
    std::shared_ptr<SemaphoreCore> core = it->core.lock();
    if (!core) {
      ++it;
      continue;
    }
    // Another node serves its slot now (a failover, a migration, or a node not known when it
    // was watched): that node's lane renews it from now on, starting at once.
    const std::optional<std::string> node = lanes_.route(it->slot);
    if (node && *node != lane.key) {
      try {
        Watched moved = *it;
        moved.next = round;
        add(lane_for(*node, ended), std::move(moved));
        it = lane.watched.erase(it);
        continue;
      } catch (...) {
        // No thread for that lane: renewed here this time.
      }
    }
    due.push_back(std::move(core));
    ++it;
  }
  return due;
}

FAIRSEM_INLINE void Watchdog::run(const std::shared_ptr<Watchdog>& self,
                                  const std::shared_ptr<Lane>& lane) {
  mark_as_fairsems_thread();
  Notifier::set_for_this_thread(&self->notifier_);
  LaneConnection connection;
  std::unique_lock<std::mutex> lock(self->mu_);
  for (;;) {
    if (self->stop_) return;
    auto& watched = lane->watched;
    watched.erase(std::remove_if(watched.begin(), watched.end(),
                                 [](const Watched& w) { return w.core.expired(); }),
                  watched.end());
    if (watched.empty()) {
      // Nothing left to renew on this node: the lane retires (joined by the next watch() or
      // stop(), or by the start of a semaphore handed to it meanwhile).
      lane->thread.retire();
      return;
    }
    const std::uint64_t generation = lane->generation;
    const auto changed = [&] { return self->stop_ || lane->generation != generation; };
    const auto next = watchdog_helpers::earliest(watched);
    if (Clock::now() < next) {
      // Woken early for a semaphore newly watched: its first round may come sooner.
      lane->cv.wait_until(lock, next, changed);
      continue;
    }
    std::vector<OwnedThread> ended;  // let go of after the lock
    std::vector<std::shared_ptr<SemaphoreCore>> due = self->take_due(*lane, Clock::now(), ended);
    auto longest = std::chrono::milliseconds(0);  // of the intervals of what it renews
    for (const Watched& w : watched) longest = std::max(longest, w.interval);
    lock.unlock();
    ended.clear();
    std::vector<const SemaphoreCore*> failed;
    for (const auto& core : due) {
      if (!self->renew(*core, connection)) failed.push_back(core.get());
    }
    // Closed once it renewed nothing for the idle timeout (and for two of the longest
    // intervals, lest a slow renewal reconnect each round).
    if (connection.used < Clock::now() - std::max(self->idle_timeout_, 2 * longest)) {
      connection.conn.reset();
    }
    // May drop the last reference to the Client: its runtime then stops the watchdog, and this
    // thread is parked.
    due.clear();
    lock.lock();
    if (!failed.empty()) retry_soon(*lane, failed, Clock::now());
  }
}

FAIRSEM_INLINE void Watchdog::retry_soon(Lane& lane,
                                         const std::vector<const SemaphoreCore*>& failed,
                                         Clock::time_point now) {
  for (Watched& w : lane.watched) {
    if (std::find(failed.begin(), failed.end(), w.key) != failed.end()) {
      w.next = std::min(w.next, now + renewal_retry_delay(w.interval));
    }
  }
}

FAIRSEM_INLINE bool Watchdog::renew(SemaphoreCore& core, LaneConnection& w) {
  const auto permits = core.held_permits();
  if (permits.empty()) return true;
  const int slot = per_slot_ ? core.slot() : -1;
  const auto connect = [&](Clock::time_point deadline) -> Connection* {
    // The lane's node serves the slot as far as the map knows (take_due), so the connection
    // stays where it is; otherwise (a failover, a migration) it goes where the map says.
    if (w.conn) w.conn->use_slot(slot);
    if (!w.conn || w.conn->broken()) {
      try {
        w.conn = std::make_unique<Connection>(options_, discovery_, slot, deadline);
        if (std::exchange(w.connected, true)) MetricCounters::add(*core.reconnect_counter());
      } catch (const std::exception& e) {
        w.conn.reset();
        core.log(LogLevel::warning, fmt::format("fairsem: {}: the renewal cannot connect: {}",
                                                core.where(), e.what()));
        return nullptr;
      }
    }
    w.used = Clock::now();
    // Reconnects during the round count for the semaphore whose permits it renews.
    w.conn->count_reconnects(core.reconnect_counter());
    return w.conn.get();
  };
  return core.renew_round(connect, permits);
}

}  // namespace fairsem::detail
