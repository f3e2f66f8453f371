#pragma once

#include "fairsem/impl/async_acquire.hpp"
#include "fairsem/impl/config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "fairsem/impl/semaphore_core.hpp"
#include "fairsem/impl/thread_reaper.hpp"

namespace fairsem::detail {

FAIRSEM_INLINE AsyncAcquire::AsyncAcquire(std::shared_ptr<SemaphoreCore> core, long long units,
                                          std::optional<Clock::time_point> deadline,
                                          AcquireCallback done)
    : core_(std::move(core)), units_(units), deadline_(deadline), done_(std::move(done)) {}

FAIRSEM_INLINE AsyncAcquire::~AsyncAcquire() = default;

FAIRSEM_INLINE void AsyncAcquire::start() {
  MetricCounters::add(core_->metrics_.acquire_attempts);
  core_->admission_->submit(
      [weak = weak_from_this(), in_flight = core_->in_flight_](AdmissionTurn turn) {
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
  post();
  return true;
}

FAIRSEM_INLINE void AsyncAcquire::post() { core_->runtime_->executor().post(task()); }

FAIRSEM_INLINE std::function<void()> AsyncAcquire::task() {
  return [weak = weak_from_this(), in_flight = core_->in_flight_] {
    const InFlight::Step counted(*in_flight);  // until `self` is gone too
    if (auto self = weak.lock()) self->step();
  };
}

FAIRSEM_INLINE void AsyncAcquire::step() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    if (running_) {
      again_ = true;
      return;
    }
    running_ = true;
  }
  for (;;) {
    try {
      advance();
    } catch (...) {
      fail(std::current_exception());
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!again_ || finished_) {
      running_ = false;
      return;
    }
    again_ = false;
  }
}

FAIRSEM_INLINE void AsyncAcquire::advance() {
  // The timer that ran this step (or one due anyway) is spent: arm_timer sets the next.
  if (timer_ && Clock::now() >= *timer_) timer_.reset();
  std::exception_ptr cancelled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled = cancelled_;
  }
  if (cancelled) {
    wake_up_.reset();
    // The callback first: it should not wait for a round trip (or, with Redis unreachable, a
    // command timeout). The entry is removed right after, by this step, which the semaphore's
    // destructor waits for.
    finish(cancelled, std::nullopt);
    if (queued_) leave();
    return;
  }
  if (!queued_) {
    if (first_call()) return;
  } else {
    bool poll_now = false;
    if (woken(poll_now)) return;
    const auto now = Clock::now();
    if (deadline_ && now >= *deadline_) {
      wake_up_.reset();
      leave();
      finish(nullptr, std::nullopt);
      return;
    }
    if ((poll_now || now >= next_poll_) && poll()) return;
  }
  arm_timer();
}

FAIRSEM_INLINE bool AsyncAcquire::first_call() {
  std::optional<AdmissionTurn> turn = take_turn();
  if (!turn) {
    // Still in line behind requests made before it: nothing sent yet, and only its deadline
    // (a later step) or a cancel can end it before its turn.
    const bool waits = deadline_ && *deadline_ > started_;
    if (waits && Clock::now() >= *deadline_) {
      finish(nullptr, std::nullopt);
    } else if (waits) {
      arm_timer();
    }
    return true;
  }
  // No time to wait: like try_acquire, never queue.
  if (deadline_ && *deadline_ <= started_) {
    finish(nullptr, core_->try_acquire_admitted(units_, *turn));
    return true;
  }
  return queue(*turn);
}

FAIRSEM_INLINE bool AsyncAcquire::queue(AdmissionTurn& turn) {
  id_ = core_->next_id();
  std::optional<Permit> granted;
  {
    SemaphoreCore::Borrowed conn(*core_);
    sent_ = Clock::now();
    asked_ = true;
    reply_ = core_->run_acquire(*conn, id_, "queue", units_);
    turn.done();  // the ticket is drawn: the next request may draw its own
    queued_ = true;
    if (reply_.state == AcquireState::granted) {
      core_->await_replicas(*conn, id_);
      granted = core_->make_permit(id_, reply_, sent_);
    } else {
      wake_up_ = core_->runtime_->waker(core_->slot_, core_->keys_[5])
                     ->subscribe(core_->keys_[5], id_, *conn,
                                 [weak = weak_from_this(), in_flight = core_->in_flight_] {
                                   const InFlight::Step counted(*in_flight);
                                   if (auto self = weak.lock()) self->post();
                                 });
    }
  }
  if (!granted) {
    next_poll_ = Clock::now() + core_->poll_interval_;
    return false;
  }
  // After the connection went back to the pool: the callback may use the semaphore.
  finish(nullptr, std::move(granted));
  return true;
}

FAIRSEM_INLINE bool AsyncAcquire::woken(bool& poll_now) {
  const WakeWait waited = wake_up_->take();
  if (waited.woken) {
    if (core_->take_wake_up(*waited.woken, id_, units_, reply_, sent_)) {
      wake_up_.reset();
      finish(nullptr, core_->make_permit(id_, reply_, sent_));
      return true;
    }
    poll_now = true;  // promoted, with too little of the lease left to take it as it is
  } else if (waited.interrupted) {
    poll_now = true;  // the waker's BRPOP was cut off: a wake-up may be lost
  } else if (!waited.error.empty()) {
    if (is_transient(waited.error)) {
      poll_now = true;
    } else if (!std::exchange(reported_, true)) {
      core_->wake_up_refused(waited.error);
    }
  }
  return false;
}

FAIRSEM_INLINE bool AsyncAcquire::poll() {
  std::optional<Permit> granted;
  {
    SemaphoreCore::Borrowed conn(*core_);
    sent_ = Clock::now();
    reply_ = core_->run_acquire(*conn, id_, "queue", units_, reply_.ticket);
    core_->throw_if_removed(reply_, id_, units_);
    if (reply_.state == AcquireState::granted) {
      wake_up_.reset();
      core_->await_replicas(*conn, id_);
      granted = core_->make_permit(id_, reply_, sent_);
    } else {
      // Still queued: a wake-up popped before this reply is older than what the poll saw.
      wake_up_->rearm(*conn);
    }
  }
  if (!granted) {
    reported_ = false;
    next_poll_ = Clock::now() + core_->poll_interval_;
    return false;
  }
  finish(nullptr, std::move(granted));  // the connection is back in the pool
  return true;
}

FAIRSEM_INLINE void AsyncAcquire::arm_timer() {
  Clock::time_point when = next_poll_;
  if (deadline_) when = std::min(when, *deadline_);
  if (when == Clock::time_point::max()) return;  // in line, with no deadline: nothing to time
  if (timer_ && *timer_ <= when) return;         // an earlier timer comes first, and arms again
  timer_ = when;
  core_->runtime_->executor().post_at(when, task());
}

FAIRSEM_INLINE void AsyncAcquire::leave() noexcept {
  std::optional<SemaphoreCore::Borrowed> conn;
  core_->leave(conn, id_, reply_.ticket);
}

FAIRSEM_INLINE void AsyncAcquire::finish(const std::exception_ptr& outcome,
                                         std::optional<Permit> permit) {
  std::exception_ptr error = outcome;
  std::optional<AdmissionTurn> turn;  // a turn that came but was not taken passes on as it goes
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    finished_ = true;
    turn = std::exchange(turn_, std::nullopt);
    // cancel() came first (it returned true) while this step granted or gave up: the request
    // ends cancelled all the same, and a permit it got is released (passed on) at once.
    if (cancelled_ && !error) error = cancelled_;
  }
  turn.reset();  // before the callback, which may take its time
  if (error) permit.reset();
  wake_up_.reset();
  MetricCounters& m = core_->metrics_;
  if (permit) {
    m.record_grant(Clock::now() - started_, units_);
  } else if (!error) {
    MetricCounters::add(deadline_ && *deadline_ <= started_ ? m.rejections : m.timeouts);
  } else {
    try {
      std::rethrow_exception(error);
    } catch (const EvictedError&) {
      MetricCounters::add(m.evictions_seen);
    } catch (const CancelledError&) {
      // Not the semaphore's doing: counted as neither.
    } catch (...) {
      MetricCounters::add(m.errors);
    }
  }
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

FAIRSEM_INLINE void AsyncAcquire::fail(const std::exception_ptr& error) {
  wake_up_.reset();
  try {
    std::rethrow_exception(error);
  } catch (const EvictedError&) {
    // The entry is gone already.
  } catch (const RequestTooLargeError&) {
    // Likewise.
  } catch (const ReplicationError&) {
    // A caller-chosen id may be another handle's permit: left to its lease.
    if (asked_ && core_->options_.permit_id.empty()) leave();
  } catch (...) {
    // Without a ticket only a random id is surely this request's own.
    if (asked_ && (reply_.ticket != 0 || core_->options_.permit_id.empty())) leave();
  }
  finish(error, std::nullopt);
}

// --- SemaphoreCore's part ---------------------------------------------------------------------

FAIRSEM_INLINE std::shared_ptr<AsyncAcquire> SemaphoreCore::acquire_async(
    long long units, std::optional<Clock::time_point> deadline, AcquireCallback done) {
  if (!done) throw InvalidArgument("fairsem: an asynchronous acquire needs a callback");
  check_units(units);
  auto request =
      std::make_shared<AsyncAcquire>(shared_from_this(), units, deadline, std::move(done));
  if (!in_flight_->add(request)) {
    throw CancelledError(fmt::format(
        "fairsem: {}: a new asynchronous acquire while the FairSemaphore is destroyed", where()));
  }
  try {
    request->start();
  } catch (...) {
    forget_request(request.get());
    throw;
  }
  return request;
}

FAIRSEM_INLINE void SemaphoreCore::forget_request(AsyncAcquire* request) {
  in_flight_->remove(request);
}

FAIRSEM_INLINE void SemaphoreCore::cancel_requests(const std::exception_ptr& why) {
  for (const auto& request : in_flight_->snapshot(false)) request->cancel(why);
}

FAIRSEM_INLINE void SemaphoreCore::end_requests(const std::exception_ptr& why) {
  // A callback's new request is refused from now on.
  for (const auto& request : in_flight_->snapshot(true)) request->cancel(why);
  // Not on fairsem's own threads (the callback's step would wait for itself; the watchdog
  // would leave every other permit unrenewed meanwhile), nor while holding a pool connection
  // (a cancel step may need the last one).
  if (on_fairsems_thread() || Runtime::this_thread_holds_a_connection()) return;
  in_flight_->wait_idle();
}

// --- InFlight ---------------------------------------------------------------------------------

FAIRSEM_INLINE InFlight::Step::Step(InFlight& in_flight) : in_flight_(in_flight) {
  std::lock_guard<std::mutex> lock(in_flight_.mu);
  ++in_flight_.steps;
}

FAIRSEM_INLINE InFlight::Step::~Step() {
  {
    std::lock_guard<std::mutex> lock(in_flight_.mu);
    --in_flight_.steps;
  }
  in_flight_.cv.notify_all();
}

FAIRSEM_INLINE bool InFlight::add(const std::shared_ptr<AsyncAcquire>& request) {
  std::lock_guard<std::mutex> lock(mu);
  if (closing) return false;
  pending.emplace(request.get(), request);
  return true;
}

FAIRSEM_INLINE void InFlight::remove(AsyncAcquire* request) {
  std::shared_ptr<AsyncAcquire> owned;  // let go of after the lock (the caller holds one too)
  {
    std::lock_guard<std::mutex> lock(mu);
    const auto it = pending.find(request);
    if (it == pending.end()) return;
    owned = std::move(it->second);
    pending.erase(it);
  }
  cv.notify_all();
}

FAIRSEM_INLINE std::vector<std::shared_ptr<AsyncAcquire>> InFlight::snapshot(bool close) {
  std::vector<std::shared_ptr<AsyncAcquire>> requests;
  std::lock_guard<std::mutex> lock(mu);
  if (close) closing = true;
  requests.reserve(pending.size());
  for (const auto& entry : pending) requests.push_back(entry.second);
  return requests;
}

FAIRSEM_INLINE void InFlight::wait_idle() {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return pending.empty() && steps == 0; });
}

}  // namespace fairsem::detail
