#pragma once

// SemaphoreLock: a FairSemaphore as a TimedLockable, for std::unique_lock and std::scoped_lock.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

#include "fairsem/semaphore.hpp"

namespace fairsem {

/// Adapts a FairSemaphore to TimedLockable, for std::unique_lock and std::scoped_lock. One
/// SemaphoreLock holds at most one permit, of `units` units: use one per thread (it is not
/// itself thread-safe).
///
/// It shares the semaphore with the FairSemaphore it was made from, as a Permit does, not that
/// object: it stays valid when the FairSemaphore is moved (a std::vector<FairSemaphore> that
/// grows) and keeps acquiring after it is destroyed. Movable; a moved-from SemaphoreLock holds
/// nothing, and its lock calls throw UsedAfterMoveError.
class SemaphoreLock {
 public:
  /// Every lock takes `units` units of `semaphore` at once (as acquire(units)). Throws
  /// InvalidArgument for units below 1 or above the semaphore's limit (options().limit), and
  /// UsedAfterMoveError for a moved-from FairSemaphore.
  explicit SemaphoreLock(FairSemaphore& semaphore, long long units = 1)
      : core_(semaphore.core()), units_(checked(semaphore, units)) {}

  /// Throws std::system_error(resource_deadlock_would_occur) if this lock already holds.
  void lock() {
    check_not_held();
    permit_ = std::move(*FairSemaphore::acquire_on(core(), units_, true, std::nullopt));
  }
  bool try_lock() {
    check_not_held();
    return store(FairSemaphore::acquire_on(core(), units_, false, std::nullopt));
  }
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
    check_not_held();
    const auto deadline = std::chrono::steady_clock::now() + FairSemaphore::to_steady(timeout);
    return store(FairSemaphore::acquire_on(core(), units_, true, deadline));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    check_not_held();
    const auto left = deadline - Clock::now();
    return store(FairSemaphore::acquire_on(
        core(), units_, true, std::chrono::steady_clock::now() + FairSemaphore::to_steady(left)));
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
  /// The units every lock takes.
  long long units() const noexcept { return units_; }

 private:
  static long long checked(const FairSemaphore& semaphore, long long units) {
    const long long limit = semaphore.options().limit;
    if (units < 1 || units > limit) {
      throw InvalidArgument("fairsem: semaphore '" + semaphore.name() + "': a SemaphoreLock of " +
                            std::to_string(units) + " units; a lock takes 1 to " +
                            std::to_string(limit) + " (the limit)");
    }
    return units;
  }
  detail::SemaphoreCore& core() const {
    if (!core_) {
      throw UsedAfterMoveError(
          "fairsem: a SemaphoreLock was used after it was moved from; a moved-from SemaphoreLock "
          "may only be destroyed or assigned to");
    }
    return *core_;
  }
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

  std::shared_ptr<detail::SemaphoreCore> core_;  // the semaphore's, shared with its handles
  long long units_;
  Permit permit_;
};

}  // namespace fairsem
