#pragma once

// Leaving the queue: a request that ends without its permit (cancelled, timed out, failed)
// removes its entry at once, bounded by one command timeout (SemaphoreCore::leave); when the
// server is away, in the background on the Client's worker threads until the entry would
// expire anyway (leave_later, retry_leaves); and a FairSemaphore that goes away drops those
// (close_leaves). See docs/guarantees.md, "A hung server costs a batch of cancels one command
// timeout". Internal.

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/semaphore/semaphore_core.hpp"

#include <fmt/format.h>

#include <iterator>
#include <utility>
#include <vector>

#include "fairsem/impl/protocol/server_support.hpp"
#include "fairsem/impl/scope_exit.hpp"
#include "fairsem/impl/threads/thread_reaper.hpp"

namespace fairsem::detail {

FAIRSEM_INLINE std::exception_ptr SemaphoreCore::leave(std::optional<Borrowed>& conn,
                                                       const std::string& id, long long ticket,
                                                       bool background) noexcept {
  // Removes the queue entry and the wake list; if the waiter was promoted a moment ago, this
  // frees the permit and wakes the next waiter.
  try {
    if (!background && Clock::now().time_since_epoch().count() < leaves_away_until_.load()) {
      return std::make_exception_ptr(ConnectionError(fmt::format(
          "fairsem: {}: a leave did not reach the server a moment ago; this one is tried again "
          "in the background",
          where())));
    }
    if (!conn) conn.emplace(*this);
    Connection& c = **conn;
    const ScopeExit bounded([&c] { c.set_deadline(std::nullopt); });
    c.set_deadline(Clock::now() + runtime_->options().command_timeout);
    run(c, "release", {id, std::to_string(ticket), receipt_arg_, "leaving"});
    leaves_away_until_.store(0);
    return nullptr;
  } catch (const std::exception& e) {
    std::exception_ptr error = std::current_exception();
    const bool passes = detail::passes(error);
    if (passes) {  // connecting for it too
      leaves_away_until_.store(
          (Clock::now() + runtime_->options().command_timeout).time_since_epoch().count());
    }
    log(LogLevel::warning,
        fmt::format("fairsem: {}: could not leave the queue ({}); {}", where(), e.what(),
                    passes ? "trying again in the background until the entry expires"
                           : "the entry expires within one lease"));
    return error;
  } catch (...) {
    return std::current_exception();
  }
}

FAIRSEM_INLINE void SemaphoreCore::leave_later(const std::string& id, long long ticket,
                                               Clock::time_point until) noexcept {
  try {
    {
      std::lock_guard<std::mutex> lock(leaves_mu_);
      if (leaves_closed_) return;  // the handle is gone: the entry expires by `until`
      leaves_.push_back({id, ticket, until});
      if (!leave_runs_.enter()) return;  // the retry under way takes it
    }
    runtime_->executor().post([weak = weak_from_this()] {
      if (auto self = weak.lock()) self->retry_leaves();
    });
  } catch (const std::exception& e) {
    {
      std::lock_guard<std::mutex> lock(leaves_mu_);
      leave_runs_.end();
    }
    log(LogLevel::warning, fmt::format("fairsem: {}: could not leave the queue later ({}); the "
                                       "entry expires within one lease",
                                       where(), e.what()));
  }
}

FAIRSEM_INLINE void SemaphoreCore::close_leaves() noexcept {
  std::unique_lock<std::mutex> lock(leaves_mu_);
  leaves_closed_ = true;
  leaves_.clear();
  if (on_fairsems_thread() || ConnectionPool::this_thread_holds_a_connection()) return;
  leaves_cv_.wait(lock, [&] { return !leaves_running_; });
}

FAIRSEM_INLINE void SemaphoreCore::retry_leaves() {
  std::vector<PendingLeave> pending;
  {
    std::lock_guard<std::mutex> lock(leaves_mu_);
    if (leaves_closed_) {
      leave_runs_.end();
      return;
    }
    pending.swap(leaves_);
    leaves_running_ = true;
  }
  const ScopeExit running([this] {
    {
      std::lock_guard<std::mutex> lock(leaves_mu_);
      leaves_running_ = false;
    }
    leaves_cv_.notify_all();
  });
  // One at a time, and none after a failure that passes: while the server is away, one call
  // a round finds that out, not one per entry.
  std::vector<PendingLeave> again;
  bool away = false;
  for (PendingLeave& leave_it : pending) {
    if (Clock::now() >= leave_it.until) continue;  // reaped before it could be promoted
    {
      std::lock_guard<std::mutex> lock(leaves_mu_);
      if (leaves_closed_) break;
    }
    if (away) {
      again.push_back(std::move(leave_it));
      continue;
    }
    std::optional<Borrowed> conn;
    const std::exception_ptr error = leave(conn, leave_it.id, leave_it.ticket, true);
    if (error && detail::passes(error)) {
      away = true;
      again.push_back(std::move(leave_it));
    }
  }
  Clock::time_point next;
  {
    std::lock_guard<std::mutex> lock(leaves_mu_);
    if (!leaves_closed_) {
      leaves_.insert(leaves_.end(), std::make_move_iterator(again.begin()),
                     std::make_move_iterator(again.end()));
    }
    if (leaves_.empty()) {
      leave_runs_.end();
      leave_backoff_.reset();
      return;
    }
    if (!away) leave_backoff_.reset();  // new ones came meanwhile: tried at once
    next = Clock::now() + (away ? leave_backoff_.next() : milliseconds(0));
  }
  try {
    runtime_->executor().post_at(next, [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->retry_leaves();
    });
  } catch (const std::exception& e) {
    {
      std::lock_guard<std::mutex> lock(leaves_mu_);
      leaves_.clear();
      leave_runs_.end();
    }
    log(LogLevel::warning, fmt::format("fairsem: {}: could not leave the queue later ({}); the "
                                       "entries expire within one lease",
                                       where(), e.what()));
  }
}

}  // namespace fairsem::detail
