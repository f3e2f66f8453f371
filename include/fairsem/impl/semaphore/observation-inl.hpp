#pragma once

// Observation: a semaphore's events, told to its MetricsObserver.

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/semaphore/observation.hpp"

#include "fairsem/errors.hpp"

namespace fairsem::detail {

FAIRSEM_INLINE AcquireResult Observation::result_of(AcquireOutcome outcome,
                                                    const std::exception_ptr& error) {
  switch (outcome) {
    case AcquireOutcome::granted:
      return AcquireResult::granted;
    case AcquireOutcome::rejected:
      return AcquireResult::refused;
    case AcquireOutcome::timed_out:
      return AcquireResult::timed_out;
    case AcquireOutcome::cancelled:
      return AcquireResult::cancelled;
    default:
      break;
  }
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const QueueFullError&) {
      return AcquireResult::refused;
    } catch (const CancelledError&) {
      return AcquireResult::cancelled;
    } catch (...) {
      return AcquireResult::error;
    }
  }
  return AcquireResult::error;
}

FAIRSEM_INLINE void Observation::limit_set(long long limit) const noexcept {
  tell([&](MetricsObserver& o) { o.limit_set(name_, limit); });
}

FAIRSEM_INLINE void Observation::acquire_started(long long units) const noexcept {
  tell([&](MetricsObserver& o) { o.acquire_started(name_, units); });
}

FAIRSEM_INLINE void Observation::acquire_ended(AcquireOutcome outcome,
                                               const std::exception_ptr& error, long long units,
                                               Clock::duration waited) const noexcept {
  tell([&](MetricsObserver& o) {
    o.acquire_ended(name_, result_of(outcome, error), units,
                    std::chrono::duration_cast<std::chrono::nanoseconds>(waited));
  });
}

FAIRSEM_INLINE void Observation::permit_granted(long long units) const noexcept {
  tell([&](MetricsObserver& o) { o.permit_granted(name_, units); });
}

FAIRSEM_INLINE void Observation::units_released(long long units) const noexcept {
  tell([&](MetricsObserver& o) { o.units_released(name_, units); });
}

FAIRSEM_INLINE void Observation::permit_ended(long long units, Clock::time_point granted_at,
                                              bool lost) const noexcept {
  tell([&](MetricsObserver& o) {
    o.permit_ended(name_, units,
                   std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - granted_at),
                   lost);
  });
}

FAIRSEM_INLINE void Observation::permit_lost_at_release() const noexcept {
  tell([&](MetricsObserver& o) { o.permit_lost_at_release(name_); });
}

FAIRSEM_INLINE void Observation::renewals_failed(std::size_t count) const noexcept {
  tell([&](MetricsObserver& o) {
    for (std::size_t i = 0; i < count; ++i) o.renewal_failed(name_);
  });
}

FAIRSEM_INLINE void Observation::call_batched() const noexcept {
  tell([&](MetricsObserver& o) { o.call_batched(name_); });
}

}  // namespace fairsem::detail
