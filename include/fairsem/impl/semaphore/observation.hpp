#pragma once

// What a semaphore tells its MetricsObserver (metrics.hpp): the events, named as the observer
// takes them, each call guarded so that an observer's exception never reaches fairsem.
// Internal.

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "fairsem/impl/protocol/acquire_fsm.hpp"
#include "fairsem/metrics.hpp"

namespace fairsem::detail {

class Observation {
 public:
  using Clock = std::chrono::steady_clock;

  Observation() = default;
  /// Tells `observer` (null: nobody) about semaphore `name`.
  Observation(std::shared_ptr<MetricsObserver> observer, std::string name)
      : observer_(std::move(observer)), name_(std::move(name)) {}

  /// The result an acquire that ended with `outcome` (and `error`, what it throws) reports.
  static AcquireResult result_of(AcquireOutcome outcome, const std::exception_ptr& error);

  void limit_set(long long limit) const noexcept;
  void acquire_started(long long units) const noexcept;
  void acquire_ended(AcquireOutcome outcome, const std::exception_ptr& error, long long units,
                     Clock::duration waited) const noexcept;
  void permit_granted(long long units) const noexcept;
  void units_released(long long units) const noexcept;
  void permit_ended(long long units, Clock::time_point granted_at, bool lost) const noexcept;
  void permit_lost_at_release() const noexcept;
  void renewals_failed(std::size_t count) const noexcept;
  void call_batched() const noexcept;

 private:
  /// Calls `tell(observer)` if there is an observer; what it throws is dropped.
  template <typename Tell>
  void tell(Tell&& tell) const noexcept {
    if (!observer_) return;
    try {
      std::forward<Tell>(tell)(*observer_);
    } catch (...) {
      // An observer must not break what it watches.
    }
  }

  std::shared_ptr<MetricsObserver> observer_;
  std::string name_;
};

}  // namespace fairsem::detail
