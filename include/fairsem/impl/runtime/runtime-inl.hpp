#pragma once

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/runtime/runtime.hpp"
#include "fairsem/impl/threads/thread_reaper.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <string_view>
#include <utility>

#include "fairsem/client.hpp"
#include "fairsem/impl/semaphore/semaphore_core.hpp"

namespace fairsem::detail {

namespace runtime_helpers {

/// `options` for the connections of one role of the Client: named "<client_name>:<role>" when
/// the user gave a client_name (see ConnectionOptions::client_name).
inline ConnectionOptions for_role(ConnectionOptions options, std::string_view role) {
  if (!options.client_name.empty()) {
    options.client_name.append(":").append(role.data(), role.size());
  }
  return options;
}

/// The most script calls one batch carries (ClientOptions::batch_calls).
inline constexpr std::size_t kMaxBatch = 64;

}  // namespace runtime_helpers

FAIRSEM_INLINE Runtime::Runtime(ConnectionOptions options, ClientOptions client_options)
    : options_((options.validate(), std::move(options))),
      discovery_(options_.routed() ? std::make_shared<Discovery>(options_) : nullptr),
      pool_(runtime_helpers::for_role(options_, "pool"), discovery_,
            (client_options.validate(), client_options.max_connections)),
      batch_calls_(client_options.batch_calls),
      executor_(client_options.worker_threads),
      watchdog_(std::make_shared<Watchdog>(runtime_helpers::for_role(options_, "renew"), discovery_,
                                           client_options.idle_timeout)),
      release_in_background_(client_options.release_in_background),
      metrics_observer_(std::move(client_options.metrics_observer)),
      idle_timeout_(client_options.idle_timeout),
      client_id_(random_id()) {}

FAIRSEM_INLINE Runtime::~Runtime() {
  for (auto& entry : wakers_) entry.second->stop();
  // The last reference can be dropped on the watchdog thread itself (a permit released in
  // on_lost): that thread is parked, and leaves once the round that holds its Watchdog is over.
  watchdog_->stop();
}

FAIRSEM_INLINE Reply Runtime::eval(Connection& conn, const Script& script, const Args& keys,
                                   const Args& args, bool* batched) {
  if (!batch_calls_ || conn.has_deadline()) return conn.eval(script, keys, args);
  CallBatcher* batcher = nullptr;
  {
    std::lock_guard<std::mutex> lock(batchers_mu_);
    std::unique_ptr<CallBatcher>& slot = batchers_[conn.endpoint()];
    if (!slot) slot = std::make_unique<CallBatcher>(runtime_helpers::kMaxBatch);
    batcher = slot.get();
  }
  return batcher->eval(conn, script, keys, args, batched);
}

FAIRSEM_INLINE std::vector<Connection> Runtime::master_connections() const {
  owner().check("this Client");
  std::vector<Connection> out;
  if (!discovery_) {
    out.emplace_back(options_);
  } else if (discovery_->sentinel()) {
    out.emplace_back(options_, discovery_, 0);
  } else {
    for (const NodeAddress& node : discovery_->masters()) {
      out.emplace_back(discovery_->node_options(node));
    }
  }
  return out;
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
  if (on_fairsems_thread() || ConnectionPool::this_thread_holds_a_connection()) return;
  std::unique_lock<std::mutex> lock(releases_->mu);
  releases_->cv.wait(lock, [&] { return releases_->count == 0; });
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

FAIRSEM_INLINE std::shared_ptr<Waker> Runtime::waker(int slot) {
  std::lock_guard<std::mutex> lock(wakers_mu_);
  const auto given = slot_wakers_.find(slot);
  if (given != slot_wakers_.end()) return given->second;
  // A Cluster Client whose semaphores use many slots over time keeps an entry only for those
  // in use: a slot its waker no longer serves (its lane closed idle) is forgotten, and so is a
  // waker no slot uses whose thread has ended. (A slot forgotten just as a waiter of it was
  // given its waker, and given to another waker after a failover: both listen on its inbox
  // for a while; a wake-up one pops for the other's waiter goes to it through their
  // WakerGroup.)
  if (slot_wakers_.size() >= wakers_sweep_at_) {
    for (auto it = slot_wakers_.begin(); it != slot_wakers_.end();) {
      it = it->second->serves(it->first) ? std::next(it) : slot_wakers_.erase(it);
    }
    for (auto it = wakers_.begin(); it != wakers_.end();) {
      const bool unused = it->second.use_count() == 1 && !it->second->running();
      it = unused ? wakers_.erase(it) : std::next(it);
    }
    wakers_sweep_at_ = std::max<std::size_t>(64, 2 * slot_wakers_.size());
  }
  // The node the slot map names now; "" while the map does not know the slot.
  std::shared_ptr<Waker>& waker = wakers_[wakers_.route(slot).value_or(std::string())];
  if (!waker) {
    waker = std::make_shared<Waker>(runtime_helpers::for_role(options_, "wake"), discovery_,
                                    random_id(), client_id_, idle_timeout_, waker_group_);
    waker_group_->add(waker);
  }
  slot_wakers_.emplace(slot, waker);
  return waker;
}

}  // namespace fairsem::detail
