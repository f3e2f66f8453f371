#pragma once

// FairSemaphore (semaphore.hpp): a handle on a SemaphoreCore (semaphore_core.hpp), and the
// helpers it shares with SemaphoreAdmin (semaphore_admin-inl.hpp). Permit is in permit-inl.hpp.

#include "fairsem/impl/config.hpp"
#include "fairsem/semaphore.hpp"

#include <fmt/format.h>

#include <utility>

#include "fairsem/impl/scope_exit.hpp"
#include "fairsem/impl/semaphore/async_acquire.hpp"
#include "fairsem/impl/semaphore/semaphore_core.hpp"
#include "fairsem/impl/semaphore/semaphore_options-inl.hpp"

namespace fairsem {

FAIRSEM_INLINE FairSemaphore::FairSemaphore(const Client& client, std::string name,
                                            SemaphoreOptions options)
    : core_(std::make_shared<detail::SemaphoreCore>(client.runtime(), std::move(name),
                                                    std::move(options))
                ->user_handle()) {
  core_->open();
}

FAIRSEM_INLINE FairSemaphore::FairSemaphore(ConnectionOptions connection, std::string name,
                                            SemaphoreOptions options)
    : FairSemaphore(Client(std::move(connection)), std::move(name), std::move(options)) {}

namespace semaphore_helpers {

/// What the asynchronous requests of a FairSemaphore handle that goes away end with; waits for
/// their callbacks (see SemaphoreCore::end_requests).
FAIRSEM_INLINE void cancel_pending(const std::shared_ptr<detail::SemaphoreCore>& core) noexcept {
  if (!core) return;  // moved from
  // Then the releases handed to the worker threads (the cancelled requests' among them).
  const detail::ScopeExit releases([&runtime = core->runtime()] { runtime.wait_for_releases(); });
  try {
    core->end_requests(std::make_exception_ptr(
        CancelledError(fmt::format("fairsem: semaphore '{}': the FairSemaphore was destroyed "
                                   "while the acquire waited",
                                   core->name()))));
  } catch (...) {
    // No memory for the error: the requests complete on their own (deadline or grant).
  }
  core->close_leaves();
}

/// In a child made by fork(), a handle's (FairSemaphore's, SemaphoreAdmin's) core is its
/// parent's: abandoned untouched (fork.hpp), and true returned; else false, nothing done.
FAIRSEM_INLINE bool abandoned_in_child(std::shared_ptr<detail::SemaphoreCore>& core) noexcept {
  if (!core || core->runtime().owner().here()) return false;
  detail::abandon(std::move(core));
  return true;
}

/// The core of a handle (`what`: its class), or UsedAfterMoveError when it was moved from.
FAIRSEM_INLINE const std::shared_ptr<detail::SemaphoreCore>& live(
    const std::shared_ptr<detail::SemaphoreCore>& core, const char* what) {
  if (!core) {
    throw UsedAfterMoveError(fmt::format(
        "fairsem: a {} was used after it was moved from; a moved-from {} may only be destroyed "
        "or assigned to (its name() is empty)",
        what, what));
  }
  return core;
}

/// The name of a handle's semaphore; empty when it was moved from.
FAIRSEM_INLINE const std::string& name_of(
    const std::shared_ptr<detail::SemaphoreCore>& core) noexcept {
  static const std::string moved_from;
  return core ? core->name() : moved_from;
}

/// What a FairSemaphore does with its core as it goes away.
FAIRSEM_INLINE void let_go(std::shared_ptr<detail::SemaphoreCore>& core) noexcept {
  if (!abandoned_in_child(core)) cancel_pending(core);
}

}  // namespace semaphore_helpers

FAIRSEM_INLINE FairSemaphore::FairSemaphore(FairSemaphore&&) noexcept = default;

FAIRSEM_INLINE FairSemaphore& FairSemaphore::operator=(FairSemaphore&& other) noexcept {
  if (this != &other) {
    semaphore_helpers::let_go(core_);
    core_ = std::move(other.core_);
  }
  return *this;
}

FAIRSEM_INLINE FairSemaphore::~FairSemaphore() { semaphore_helpers::let_go(core_); }

FAIRSEM_INLINE const std::shared_ptr<detail::SemaphoreCore>& FairSemaphore::core() const {
  return semaphore_helpers::live(core_, "FairSemaphore");
}

FAIRSEM_INLINE std::future<Permit> FairSemaphore::acquire_async(long long units) {
  auto promise = std::make_shared<std::promise<Permit>>();
  std::future<Permit> future = promise->get_future();
  core()->acquire_async(units, std::nullopt,
                        [promise](const std::exception_ptr& error, std::optional<Permit> permit) {
                          if (error) {
                            promise->set_exception(error);
                          } else {
                            promise->set_value(std::move(*permit));
                          }
                        });
  return future;
}

FAIRSEM_INLINE std::future<std::optional<Permit>> FairSemaphore::acquire_future_until(
    long long units, std::chrono::steady_clock::time_point deadline) {
  auto promise = std::make_shared<std::promise<std::optional<Permit>>>();
  std::future<std::optional<Permit>> future = promise->get_future();
  core()->acquire_async(units, deadline,
                        [promise](const std::exception_ptr& error, std::optional<Permit> permit) {
                          if (error) {
                            promise->set_exception(error);
                          } else {
                            promise->set_value(std::move(permit));
                          }
                        });
  return future;
}

FAIRSEM_INLINE AcquireRequest FairSemaphore::acquire_async(long long units, AcquireCallback done) {
  return AcquireRequest(core()->acquire_async(units, std::nullopt, std::move(done)));
}

FAIRSEM_INLINE AcquireRequest FairSemaphore::acquire_async_until(
    long long units, std::chrono::steady_clock::time_point deadline, AcquireCallback done) {
  return AcquireRequest(core()->acquire_async(units, deadline, std::move(done)));
}

FAIRSEM_INLINE bool AcquireRequest::cancel() {
  const auto request = request_.lock();
  if (!request) return false;  // completed (or never made)
  return request->cancel(
      std::make_exception_ptr(CancelledError("fairsem: the asynchronous acquire was cancelled")));
}

FAIRSEM_INLINE std::optional<Permit> FairSemaphore::acquire_on(
    detail::SemaphoreCore& core, long long units, bool wait,
    std::optional<std::chrono::steady_clock::time_point> deadline) {
  return core.measured_acquire(units, wait, deadline);
}

FAIRSEM_INLINE std::optional<Permit> FairSemaphore::try_acquire(long long units) {
  return acquire_on(*core(), units, false, std::nullopt);
}

FAIRSEM_INLINE Permit FairSemaphore::acquire(long long units) {
  return std::move(*acquire_on(*core(), units, true, std::nullopt));
}

FAIRSEM_INLINE std::optional<Permit> FairSemaphore::acquire_until_steady(
    long long units, std::chrono::steady_clock::time_point deadline) {
  return acquire_on(*core(), units, true, deadline);
}

FAIRSEM_INLINE std::size_t FairSemaphore::renew_all() { return core()->renew_all(); }

FAIRSEM_INLINE Status FairSemaphore::status() { return core()->status(); }

FAIRSEM_INLINE EvictResult FairSemaphore::evict(const std::string& permit_id) {
  return core()->evict(permit_id);
}

FAIRSEM_INLINE ResizeResult FairSemaphore::resize(long long new_limit) {
  return core()->resize(new_limit);
}

FAIRSEM_INLINE const std::string& FairSemaphore::name() const noexcept {
  return semaphore_helpers::name_of(core_);
}

FAIRSEM_INLINE const SemaphoreOptions& FairSemaphore::options() const { return core()->options(); }

FAIRSEM_INLINE Metrics FairSemaphore::metrics() const { return core()->metrics(); }

}  // namespace fairsem
