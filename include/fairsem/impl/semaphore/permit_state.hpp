#pragma once

// PermitState: one permit held through a SemaphoreCore (its id, ticket, slots and lease
// deadline), shared with the Permit and the renewals. Internal.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "fairsem/semaphore.hpp"

namespace fairsem::detail {

using Clock = std::chrono::steady_clock;

/// One permit held through a SemaphoreCore, shared by its Permit and the renewals.
struct PermitState {
  PermitState(std::string permit_id, long long permit_ticket, std::vector<long long> permit_slots,
              Clock::time_point permit_deadline)
      : id(std::move(permit_id)),
        ticket(permit_ticket),
        deadline(permit_deadline.time_since_epoch().count()),
        told_units(static_cast<long long>(permit_slots.size())),
        slots_(std::move(permit_slots)) {}

  /// The slots held now, ascending (a partial release gives back the highest).
  std::vector<long long> slots() const {
    std::lock_guard<std::mutex> lock(slots_mu_);
    return slots_;
  }
  long long first_slot() const {
    std::lock_guard<std::mutex> lock(slots_mu_);
    return slots_.empty() ? -1 : slots_.front();
  }
  long long count() const {
    std::lock_guard<std::mutex> lock(slots_mu_);
    return static_cast<long long>(slots_.size());
  }
  /// After a partial release: keeps the `keep` lowest slots.
  void keep_slots(std::size_t keep) {
    std::lock_guard<std::mutex> lock(slots_mu_);
    if (slots_.size() > keep) slots_.resize(keep);
  }

  Clock::time_point get_deadline() const noexcept {
    return Clock::time_point(Clock::duration(deadline.load(std::memory_order_acquire)));
  }
  void set_deadline(Clock::time_point t) noexcept {
    deadline.store(t.time_since_epoch().count(), std::memory_order_release);
  }

  const std::string id;
  const long long ticket;
  std::atomic<Clock::rep> deadline;
  std::atomic<bool> lost{false};
  std::atomic<bool> done{false};   // released, or dropped after a failed release
  std::atomic<bool> ended{false};  // its end told to the observer (SemaphoreCore::end_permit)
  // The units the observer was told it holds: granted, less the partial releases told.
  std::atomic<long long> told_units{0};
  const Clock::time_point granted_at = Clock::now();

 private:
  mutable std::mutex slots_mu_;
  std::vector<long long> slots_;
};

}  // namespace fairsem::detail
