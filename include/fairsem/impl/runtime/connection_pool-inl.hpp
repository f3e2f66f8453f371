#pragma once

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/runtime/connection_pool.hpp"

#include <fmt/format.h>

#include <utility>

#include "fairsem/errors.hpp"

namespace fairsem::detail {

namespace pool_helpers {

// Idle connections kept per cluster slot (standalone: in all); more are closed when returned.
inline constexpr std::size_t kMaxIdleConnections = 8;

// Pool connections the current thread holds (of any Client): one that holds some never waits.
FAIRSEM_INLINE thread_local std::size_t held_by_this_thread = 0;

}  // namespace pool_helpers

FAIRSEM_INLINE ConnectionPool::ConnectionPool(ConnectionOptions options,
                                              std::shared_ptr<Discovery> discovery,
                                              std::size_t max_connections)
    : options_(std::move(options)),
      discovery_(std::move(discovery)),
      max_connections_(max_connections) {}

FAIRSEM_INLINE bool ConnectionPool::this_thread_holds_a_connection() noexcept {
  return pool_helpers::held_by_this_thread > 0;
}

FAIRSEM_INLINE std::unique_ptr<Connection> ConnectionPool::take(
    int slot, std::optional<std::chrono::steady_clock::time_point> deadline) {
  owner_.check("this Client");
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    const auto it = idle_.find(slot);
    if (it != idle_.end() && !it->second.empty()) {
      auto conn = std::move(it->second.back());
      it->second.pop_back();
      ++pool_helpers::held_by_this_thread;
      return conn;
    }
    if (open_ < max_connections_ || pool_helpers::held_by_this_thread > 0) break;
    // At the bound: an idle connection of another slot makes room, else one comes back.
    if (close_an_idle_one()) continue;
    if (!deadline) {
      cv_.wait(lock);
    } else if (cv_.wait_until(lock, *deadline) == std::cv_status::timeout) {
      throw TimeoutError(
          fmt::format("fairsem: no connection came free before the deadline ({} of {} in use)",
                      open_, max_connections_));
    }
  }
  ++open_;
  lock.unlock();
  try {
    auto conn = std::make_unique<Connection>(options_, discovery_, slot, deadline);
    conn->set_deadline(std::nullopt);  // the deadline was the connect's only
    ++pool_helpers::held_by_this_thread;
    return conn;
  } catch (...) {
    lock.lock();
    --open_;
    cv_.notify_one();
    throw;
  }
}

FAIRSEM_INLINE void ConnectionPool::give_back(std::unique_ptr<Connection> conn) noexcept {
  if (!conn) return;
  --pool_helpers::held_by_this_thread;
  std::unique_ptr<Connection> closing;
  {
    std::lock_guard<std::mutex> lock(mu_);
    try {
      auto& idle = idle_[conn->slot()];
      if (idle.size() < pool_helpers::kMaxIdleConnections) idle.push_back(std::move(conn));
    } catch (...) {
      // No memory for the pool's bookkeeping: the connection is closed instead.
    }
    if (conn) {
      closing = std::move(conn);
      --open_;
    }
  }
  cv_.notify_one();
  // `closing` is closed here, outside the lock.
}

FAIRSEM_INLINE bool ConnectionPool::close_an_idle_one() {
  for (auto& entry : idle_) {
    if (!entry.second.empty()) {
      entry.second.pop_back();
      --open_;
      return true;
    }
  }
  return false;
}

}  // namespace fairsem::detail
