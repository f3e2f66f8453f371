#pragma once

// SemaphoreLock: a FairSemaphore as a TimedLockable, for std::unique_lock and std::scoped_lock.

#include <chrono>
#include <system_error>

#include "fairsem/semaphore.hpp"

namespace fairsem {

/// Adapts a FairSemaphore to TimedLockable, for std::unique_lock and std::scoped_lock. One
/// SemaphoreLock holds at most one permit: use one per thread (it is not itself thread-safe).
class SemaphoreLock {
 public:
  explicit SemaphoreLock(FairSemaphore& semaphore) noexcept : semaphore_(&semaphore) {}

  /// Throws std::system_error(resource_deadlock_would_occur) if this lock already holds.
  void lock() {
    check_not_held();
    permit_ = semaphore_->acquire();
  }
  bool try_lock() {
    check_not_held();
    return store(semaphore_->try_acquire());
  }
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
    check_not_held();
    return store(semaphore_->try_acquire_for(timeout));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    check_not_held();
    return store(semaphore_->try_acquire_until(deadline));
  }
  /// Releases the permit (never throws for Redis trouble; see ~Permit). Throws
  /// std::system_error(operation_not_permitted) if nothing is held.
  void unlock() {
    if (!permit_.held()) {
      throw std::system_error(std::make_error_code(std::errc::operation_not_permitted),
                              "fairsem: SemaphoreLock::unlock without a permit");
    }
    permit_ = Permit();
  }

  /// The permit held between lock and unlock (empty otherwise), e.g. for its fencing token.
  const Permit& permit() const noexcept { return permit_; }

 private:
  void check_not_held() const {
    if (permit_.held()) {
      throw std::system_error(std::make_error_code(std::errc::resource_deadlock_would_occur),
                              "fairsem: SemaphoreLock already holds a permit");
    }
  }
  bool store(std::optional<Permit> permit) {
    if (!permit) return false;
    permit_ = std::move(*permit);
    return true;
  }

  FairSemaphore* semaphore_;
  Permit permit_;
};

}  // namespace fairsem
