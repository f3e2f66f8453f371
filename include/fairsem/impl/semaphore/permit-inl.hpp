#pragma once

// Permit: a handle on one held permit's state (PermitState, semaphore_core.hpp), released when
// destroyed, on the caller's thread or, with ClientOptions::release_in_background, on the
// Client's worker threads.

#include "fairsem/impl/config.hpp"
#include "fairsem/permit.hpp"

#include <fmt/format.h>

#include <exception>
#include <memory>
#include <utility>

#include "fairsem/impl/semaphore/semaphore_core.hpp"

namespace fairsem {

FAIRSEM_INLINE Permit::Permit() noexcept = default;

FAIRSEM_INLINE Permit::Permit(std::shared_ptr<detail::SemaphoreCore> core,
                              std::shared_ptr<detail::PermitState> state) noexcept
    : core_(std::move(core)), state_(std::move(state)) {}

FAIRSEM_INLINE Permit::Permit(Permit&& other) noexcept
    : core_(std::move(other.core_)), state_(std::move(other.state_)) {}

FAIRSEM_INLINE Permit& Permit::operator=(Permit&& other) noexcept {
  if (this != &other) {
    release_quietly();
    core_ = std::move(other.core_);
    state_ = std::move(other.state_);
  }
  return *this;
}

FAIRSEM_INLINE Permit::~Permit() { release_quietly(); }

FAIRSEM_INLINE void Permit::release_quietly() noexcept {
  if (!state_ || state_->done.load()) return;
  if (!core_->runtime().owner().here()) {
    // A child's copy of its parent's permit (fork.hpp): the permit stays the parent's.
    detail::abandon(std::move(core_));
    detail::abandon(std::move(state_));
    return;
  }
  if (!core_->runtime().release_in_background()) {
    release_here();
    return;
  }
  // Handed to a worker thread: the task holds the permit, and with it the semaphore's core and
  // the Client's runtime, so the release runs whatever is destroyed meanwhile.
  std::shared_ptr<Permit> held;
  try {
    held = std::make_shared<Permit>(std::move(*this));
  } catch (...) {
    release_here();  // no memory to hand it off
    return;
  }
  detail::Runtime& runtime = held->core_->runtime();
  try {
    runtime.post_release([held] { held->release_here(); });
  } catch (...) {
    held->release_here();  // no worker thread could start
  }
}

FAIRSEM_INLINE void Permit::release_here() noexcept {
  if (!state_ || state_->done.load()) return;
  try {
    release();
  } catch (const std::exception& e) {
    core_->log(LogLevel::warning,
               fmt::format("fairsem: semaphore '{}': releasing permit {} failed ({}); it expires "
                           "with its lease",
                           core_->name(), state_->id, e.what()));
  }
}

FAIRSEM_INLINE bool Permit::held() const noexcept { return state_ && !state_->done.load(); }

FAIRSEM_INLINE const std::string& Permit::id() const {
  static const std::string empty;
  return state_ ? state_->id : empty;
}

FAIRSEM_INLINE long long Permit::fencing_token() const { return state_ ? state_->ticket : 0; }

FAIRSEM_INLINE long long Permit::count() const { return held() ? state_->count() : 0; }

FAIRSEM_INLINE std::vector<long long> Permit::slots() const {
  return held() ? state_->slots() : std::vector<long long>();
}

FAIRSEM_INLINE long long Permit::slot() const { return held() ? state_->first_slot() : -1; }

FAIRSEM_INLINE std::chrono::steady_clock::time_point Permit::deadline() const {
  return state_ ? state_->get_deadline() : std::chrono::steady_clock::time_point();
}

FAIRSEM_INLINE bool Permit::lost() const noexcept {
  if (!state_) return false;
  if (state_->lost.load()) return true;
  // A lease that ran out without a renewal is as good as lost, even before anyone checked.
  return !state_->done.load() && std::chrono::steady_clock::now() >= state_->get_deadline();
}

FAIRSEM_INLINE bool Permit::renew() {
  if (!state_) return false;
  // Local copies: on_lost may destroy this Permit (and with it the last FairSemaphore core).
  auto core = core_;
  auto state = state_;
  return core->renew(*state);
}

FAIRSEM_INLINE ReleaseResult Permit::release() {
  if (!state_) return ReleaseResult::already_released;
  auto core = core_;
  auto state = state_;
  return core->release(*state);
}

FAIRSEM_INLINE ReleaseResult Permit::release(long long units) {
  if (!state_) return ReleaseResult::already_released;
  auto core = core_;
  auto state = state_;
  return core->release_units(*state, units);
}

FAIRSEM_INLINE void Permit::release_async(ReleaseCallback done) {
  if (!done) throw InvalidArgument("fairsem: an asynchronous release needs a callback");
  if (!state_) {
    done(nullptr, ReleaseResult::already_released);
    return;
  }
  auto held = std::make_shared<Permit>(std::move(*this));
  detail::Runtime& runtime = held->core_->runtime();
  runtime.post_release([held, done = std::move(done)] {
    std::exception_ptr error;
    ReleaseResult result = ReleaseResult::already_released;
    try {
      result = held->release();
    } catch (...) {
      error = std::current_exception();
    }
    const auto core = held->core_;
    try {
      done(error, result);
    } catch (const std::exception& e) {
      core->log(LogLevel::error,
                fmt::format("fairsem: semaphore '{}': a release callback threw: {}", core->name(),
                            e.what()));
    } catch (...) {
      core->log(LogLevel::error,
                fmt::format("fairsem: semaphore '{}': a release callback threw", core->name()));
    }
  });
}

}  // namespace fairsem
