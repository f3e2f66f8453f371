#pragma once

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/semaphore/async_acquire.hpp"

#include <fmt/format.h>

#include <utility>

#include "fairsem/impl/semaphore/semaphore_core.hpp"
#include "fairsem/impl/threads/thread_reaper.hpp"

namespace fairsem::detail {

FAIRSEM_INLINE AsyncAcquire::AsyncAcquire(std::shared_ptr<SemaphoreCore> core, long long units,
                                          std::optional<Clock::time_point> deadline,
                                          AcquireCallback done)
    : core_(std::move(core)),
      units_(units),
      done_(std::move(done)),
      fsm_(core_->acquire_params(units, true, deadline, started_)),
      io_(*core_, units) {}

FAIRSEM_INLINE AsyncAcquire::~AsyncAcquire() = default;

FAIRSEM_INLINE void AsyncAcquire::start() {
  core_->count_attempt(units_);
  io_.set_hook([weak = weak_from_this(), in_flight = core_->in_flight()] {
    const InFlight::Step counted(*in_flight);
    if (auto self = weak.lock()) self->post();
  });
  // Before any step can run: the machine starts in line. Its start is the request's own time,
  // which a deadline can have passed only for a try (that waits for its turn with no timer), so
  // it finishes nothing here, on the caller's thread. A deadline ends the wait in line.
  const AcquireAction in_line = fsm_.resume(AcquireEvent::start(started_));
  waits_for_ = in_line.kind;
  if (in_line.until) {
    timer_ = *in_line.until;
    core_->runtime().executor().post_at(*in_line.until, task());
  }
  core_->admission().submit(
      [weak = weak_from_this(), in_flight = core_->in_flight()](AdmissionTurn turn) {
        const InFlight::Step counted(*in_flight);  // until `self` is gone too
        // A request that is gone (it ended in line) hands its turn on as `turn` goes.
        if (auto self = weak.lock()) self->admitted(std::move(turn));
      });
}

FAIRSEM_INLINE void AsyncAcquire::admitted(AdmissionTurn turn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;  // cancelled or timed out in line: the turn passes on as it goes
    turn_ = std::move(turn);
  }
  step();
}

FAIRSEM_INLINE std::optional<AdmissionTurn> AsyncAcquire::take_turn() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(turn_, std::nullopt);
}

FAIRSEM_INLINE bool AsyncAcquire::cancel(std::exception_ptr why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_ || cancelled_) return false;
    cancelled_ = std::move(why);
  }
  io_.interrupt();  // a call under way gives up its retries: the request leaves instead
  post();
  return true;
}

FAIRSEM_INLINE void AsyncAcquire::post() { core_->runtime().executor().post(task()); }

FAIRSEM_INLINE std::function<void()> AsyncAcquire::task() {
  return [weak = weak_from_this(), in_flight = core_->in_flight()] {
    const InFlight::Step counted(*in_flight);  // until `self` is gone too
    if (auto self = weak.lock()) self->step();
  };
}

FAIRSEM_INLINE void AsyncAcquire::step() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_ || !steps_.enter()) return;
  }
  for (;;) {
    try {
      advance();
    } catch (...) {
      // Not the I/O's (it fails as an event): out of memory, say. Completed with the error;
      // an entry left behind expires within one lease.
      io_.keep_error(std::current_exception());
      io_.let_go();
      finish(AcquireOutcome::failed);
    }
    // A step gives back the connection it borrowed before it ends, on its own thread: the
    // leave that follows a cancelled request's callback borrows one as the machine stops, and
    // the request can be let go of last on another thread (one that cancelled it, or a
    // destructor's), which would give the connection back there and skew both threads' count
    // of the connections they hold (ConnectionPool::take): one would pass the pool's bound
    // for good, the other would not wait for callbacks where it must (end_requests).
    io_.let_go();
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) {
      steps_.end();
      return;
    }
    if (!steps_.again()) return;
  }
}

FAIRSEM_INLINE void AsyncAcquire::advance() {
  // The timer that ran this step (or one due anyway) is spent: the next wait arms another.
  if (timer_ && Clock::now() >= *timer_) timer_.reset();
  run(fsm_.resume(what_came()));
}

FAIRSEM_INLINE AcquireEvent AsyncAcquire::what_came() {
  const auto now = Clock::now();
  // The cancel first: a wake-up that came with it grants nothing any more.
  if (hear_cancel()) return AcquireEvent::cancelled(now);
  if (waits_for_ == AcquireAction::Kind::wait_turn) {
    if (std::optional<AdmissionTurn> turn = take_turn()) {
      io_.set_turn(std::move(*turn));
      return AcquireEvent::admitted(now);
    }
  } else if (waits_for_ == AcquireAction::Kind::wait) {
    if (std::optional<AcquireEvent> came = io_.take()) return std::move(*came);
  }
  return AcquireEvent::tick(now);
}

FAIRSEM_INLINE void AsyncAcquire::run(AcquireAction action) {
  using Kind = AcquireAction::Kind;
  while (action.kind != Kind::none) {
    if (action.kind == Kind::wait_turn || action.kind == Kind::wait ||
        action.kind == Kind::backoff) {
      // Until the turn, the wake-up or cancel() posts a step, or the timer runs one. A backoff
      // listens as a wait does: a wake-up says the server is back.
      waits_for_ = action.kind == Kind::wait_turn ? Kind::wait_turn : Kind::wait;
      io_.let_go();
      const std::exception_ptr trouble = action.until ? arm_timer(*action.until) : nullptr;
      if (!trouble) return;
      io_.keep_error(trouble);
      action = fsm_.resume(AcquireEvent::failed(true, Clock::now()));
    } else if (hear_cancel()) {
      // cancel() came while this step ran: the machine hears it in place of this action,
      // which is dropped (a grant not made yet, say, is given back by leaving instead).
      action = fsm_.resume(AcquireEvent::cancelled(Clock::now()));
    } else if (action.kind == Kind::finish) {
      io_.let_go();  // the callback may use the semaphore
      finish(action.outcome);
      action = fsm_.resume(AcquireEvent::done(Clock::now()));
    } else {
      action = fsm_.resume(io_.perform(action));
    }
  }
}

FAIRSEM_INLINE bool AsyncAcquire::hear_cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!cancelled_ || cancel_heard_) return false;
  cancel_heard_ = true;
  return true;
}

FAIRSEM_INLINE std::exception_ptr AsyncAcquire::arm_timer(Clock::time_point when) noexcept {
  if (timer_ && *timer_ <= when) return nullptr;  // an earlier timer comes first, and arms again
  const std::optional<Clock::time_point> before = std::exchange(timer_, when);
  try {
    core_->runtime().executor().post_at(when, task());
  } catch (...) {
    timer_ = before;
    return std::current_exception();
  }
  return nullptr;
}

FAIRSEM_INLINE void AsyncAcquire::finish(AcquireOutcome outcome) {
  std::optional<AdmissionTurn> turn;  // a turn that came but was not taken passes on as it goes
  std::exception_ptr cancelled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    finished_ = true;
    turn = std::exchange(turn_, std::nullopt);
    cancelled = cancelled_;
  }
  // cancel() came first (it returned true) while this step granted, gave up or failed: the
  // request ends cancelled all the same, as cancel() promised (a permit it got is released,
  // passed on, at once; an eviction or an error that came at that instant is not reported).
  if (cancelled) outcome = AcquireOutcome::cancelled;
  turn.reset();  // before the callback, which may take its time
  std::optional<Permit> permit = io_.take_permit();
  if (outcome != AcquireOutcome::granted) permit.reset();
  const std::exception_ptr error =
      outcome == AcquireOutcome::cancelled ? cancelled : io_.error(outcome);
  core_->count_outcome(outcome, error, Clock::now() - started_, units_);
  core_->forget_request(this);
  AcquireCallback done = std::move(done_);
  try {
    done(error, std::move(permit));
  } catch (const std::exception& e) {
    core_->log(LogLevel::error,
               fmt::format("fairsem: {}: an acquire callback threw: {}", core_->where(), e.what()));
  } catch (...) {
    core_->log(LogLevel::error,
               fmt::format("fairsem: {}: an acquire callback threw", core_->where()));
  }
}

}  // namespace fairsem::detail
