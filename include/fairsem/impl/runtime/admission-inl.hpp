#pragma once

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/runtime/admission.hpp"

#include <algorithm>
#include <utility>

#include "fairsem/impl/threads/executor.hpp"

namespace fairsem::detail {

// --- AdmissionTurn --------------------------------------------------------------------------

FAIRSEM_INLINE AdmissionTurn& AdmissionTurn::operator=(AdmissionTurn&& other) noexcept {
  if (this != &other) {
    done();
    admission_ = std::move(other.admission_);
  }
  return *this;
}

FAIRSEM_INLINE void AdmissionTurn::done() noexcept {
  if (!admission_) return;
  const std::shared_ptr<Admission> admission = std::move(admission_);
  admission_.reset();
  admission->pass();
}

// --- Admission ------------------------------------------------------------------------------

FAIRSEM_INLINE void Admission::submit(Job job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (busy_) {
      line_.push_back(Entry{std::move(job), nullptr});
      return;
    }
    busy_ = true;
  }
  try {
    dispatch(std::move(job));
  } catch (...) {
    // Not submitted: whoever lined up behind it meanwhile goes next.
    pass();
    throw;
  }
}

FAIRSEM_INLINE std::optional<AdmissionTurn> Admission::wait(
    std::optional<Clock::time_point> deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!busy_) return AdmissionTurn();
  Waiter waiter;
  line_.push_back(Entry{Job(), &waiter});
  const auto ready = [&] { return waiter.ready; };
  if (!deadline) {
    waiter.cv.wait(lock, ready);
  } else if (!waiter.cv.wait_until(lock, *deadline, ready)) {
    // Withdrawn; its turn had not come (ready is set under this lock), so nothing to pass on.
    line_.erase(std::find_if(line_.begin(), line_.end(),
                             [&](const Entry& e) { return e.waiter == &waiter; }));
    return std::nullopt;
  }
  return AdmissionTurn(shared_from_this());
}

FAIRSEM_INLINE std::size_t Admission::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return line_.size();
}

FAIRSEM_INLINE void Admission::pass() noexcept {
  Job job;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (line_.empty()) {
      busy_ = false;
      return;
    }
    Entry next = std::move(line_.front());
    line_.pop_front();
    if (next.waiter != nullptr) {
      next.waiter->ready = true;
      next.waiter->cv.notify_one();  // under the lock: the Waiter lives on its thread's stack
      return;
    }
    job = std::move(next.job);
  }
  try {
    dispatch(job);
  } catch (...) {
    // No worker thread could start: the job runs here rather than never (it takes the turn
    // with it, and passes it on when done).
    job(AdmissionTurn(shared_from_this()));
  }
}

FAIRSEM_INLINE void Admission::dispatch(Job job) {
  executor_.post([self = shared_from_this(), job = std::move(job)] { job(AdmissionTurn(self)); });
}

}  // namespace fairsem::detail
