#pragma once

// WakeSubscription (wake_subscription.hpp): one waiter's registration with its Client's Waker,
// through which it waits for its wake-up.

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/wake/wake_subscription.hpp"
#include "fairsem/impl/wake/waker.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace fairsem::detail {

FAIRSEM_INLINE WakeSubscription::WakeSubscription(std::shared_ptr<Waker> waker, int slot,
                                                  std::string key, std::string inbox,
                                                  std::function<void()> hook)
    : waker_(std::move(waker)),
      slot_(slot),
      key_(std::move(key)),
      inbox_(std::move(inbox)),
      hook_(std::move(hook)) {}

FAIRSEM_INLINE WakeSubscription::~WakeSubscription() { waker_->unsubscribe(*this); }

FAIRSEM_INLINE WakeWait WakeSubscription::wait_for(std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(waker_->mu_);
  cv_.wait_for(lock, wait, [&] { return woken_.has_value() || !error_.empty() || interrupted_; });
  WakeWait result;
  result.woken = std::exchange(woken_, std::nullopt);
  result.error = std::exchange(error_, std::string());
  result.interrupted = std::exchange(interrupted_, false);
  return result;
}

FAIRSEM_INLINE void WakeSubscription::rearm(Connection& conn,
                                            std::chrono::steady_clock::time_point since) {
  {
    std::lock_guard<std::mutex> lock(waker_->mu_);
    // A wake-up delivered meanwhile stays: it may be for the entry the poll just saw (promoted
    // after the poll ran), and a stale one carries another ticket, which the waiter tells. So
    // does a cut-off BRPOP since the poll was sent: it may have lost a promotion that came
    // after the poll ran.
    error_.clear();
    if (interrupted_at_ < since) interrupted_ = false;
    if (listed_) return;
  }
  waker_->list(*this, conn, since);
}

}  // namespace fairsem::detail
