#pragma once

// SemaphoreCore (semaphore_core.hpp), acquiring: the blocking acquire, which drives an
// acquire's state machine (protocol/acquire_fsm.hpp) on the calling thread through AcquireIo
// (acquire_io.hpp); the asynchronous acquire's start (AsyncAcquire, async_acquire.hpp); and the
// calls AcquireIo makes of SemaphoreCore.

#include <fmt/format.h>
#include "fairsem/impl/config.hpp"

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <utility>

#include "fairsem/impl/protocol/server_support.hpp"
#include "fairsem/impl/runtime/runtime.hpp"
#include "fairsem/impl/semaphore/acquire_io.hpp"
#include "fairsem/impl/semaphore/async_acquire.hpp"
#include "fairsem/impl/semaphore/in_flight.hpp"
#include "fairsem/impl/semaphore/semaphore_core.hpp"
#include "fairsem/impl/threads/thread_reaper.hpp"

namespace fairsem::detail {

// --- The blocking acquire -----------------------------------------------------------------

FAIRSEM_INLINE std::optional<Permit> SemaphoreCore::measured_acquire(
    long long units, bool wait, std::optional<Clock::time_point> deadline) {
  using Kind = AcquireAction::Kind;
  check_process();
  check_units(units);
  const auto start = Clock::now();
  count_attempt(units);
  AcquireFsm fsm(acquire_params(units, wait, deadline, start));
  AcquireIo io(*this, units);
  AcquireOutcome outcome = AcquireOutcome::failed;
  AcquireAction action = fsm.resume(AcquireEvent::start(start));
  while (action.kind != Kind::none) {
    AcquireEvent event;
    if (action.kind == Kind::wait_turn) {
      // Behind the asynchronous requests made before this one (admission.hpp).
      std::optional<AdmissionTurn> turn = wait_turn(action.until);
      if (turn) io.set_turn(std::move(*turn));
      event = turn ? AcquireEvent::admitted(Clock::now()) : AcquireEvent::tick(Clock::now());
    } else if (action.kind == Kind::wait || action.kind == Kind::backoff) {
      // A backoff listens as a wait does: a wake-up says the server is back.
      event = io.wait(action.until.value_or(Clock::now()));
    } else if (action.kind == Kind::finish) {
      outcome = action.outcome;
      io.let_go();
      event = AcquireEvent::done(Clock::now());
    } else {
      event = io.perform(action);
    }
    action = fsm.resume(event);
  }
  const std::exception_ptr error = outcome == AcquireOutcome::granted ? nullptr : io.error(outcome);
  count_outcome(outcome, error, Clock::now() - start, units);
  if (outcome == AcquireOutcome::granted) return io.take_permit();
  if (error) std::rethrow_exception(error);
  return std::nullopt;  // rejected, or timed out
}

FAIRSEM_INLINE std::optional<AdmissionTurn> SemaphoreCore::wait_turn(
    std::optional<Clock::time_point> deadline) {
  if (on_fairsems_thread() || ConnectionPool::this_thread_holds_a_connection()) {
    return AdmissionTurn();
  }
  return admission_->wait(deadline);
}

// --- SemaphoreCore's part -------------------------------------------------------------------

FAIRSEM_INLINE AcquireParams
SemaphoreCore::acquire_params(long long units, bool wait, std::optional<Clock::time_point> deadline,
                              Clock::time_point started) const {
  AcquireParams p;
  p.units = units;
  p.wait = wait;
  p.deadline = deadline;
  p.started = started;
  p.poll_interval = poll_interval_;
  p.direct_grant_margin = direct_grant_margin_;
  p.min_replicas = options_.min_replicas;
  p.chosen_id = !options_.permit_id.empty();
  p.lease = options_.lease;
  // Spreads the retries of waiters cut off at once (RetryBackoff).
  static std::atomic<std::uint64_t> requests{0};
  p.jitter_seed = static_cast<std::uint64_t>(started.time_since_epoch().count()) ^
                  (requests.fetch_add(1, std::memory_order_relaxed) * 0x9e3779b97f4a7c15ULL);
  return p;
}

FAIRSEM_INLINE AcquireReply SemaphoreCore::run_acquire(Connection& conn, const std::string& id,
                                                       std::string_view mode, long long units,
                                                       long long ticket, bool fresh) {
  Reply reply;
  const long long expiry = idle_expiry_ms_.load();
  const std::string& tenant = options_.tenant;
  if (mode == "queue" || expiry > 0 || fresh || !tenant.empty()) {
    // A waiter's wake-ups come through its Client's inbox of this semaphore (waker.hpp); a
    // request that never queues has none.
    static const std::string no_inbox;
    const std::shared_ptr<Waker> waker =
        mode == "queue" ? runtime_->waker(slot_) : std::shared_ptr<Waker>();
    const std::string& client = waker ? waker->client() : no_inbox;
    // Args are views: the strings they see live to the end of the call.
    const std::string ticket_arg = std::to_string(ticket);
    const std::string units_arg = std::to_string(units);
    const std::string max_waiters = std::to_string(options_.max_waiters);
    const std::string expiry_arg = std::to_string(expiry);
    Args args{id, mode, owner_info_, ticket_arg, units_arg, client};
    const bool named = !tenant.empty();
    if (options_.max_waiters > 0 || expiry > 0 || fresh || named) args.push_back(max_waiters);
    if (expiry > 0 || fresh || named) args.push_back(expiry_arg);
    if (fresh || named) args.push_back(fresh ? "1" : "0");  // at kAcquireFreshArg
    if (named) args.push_back(tenant);
    reply = run(conn, "acquire", args, units, fresh);
  } else if (units != 1) {
    reply = run(conn, "acquire",
                {id, mode, owner_info_, std::to_string(ticket), std::to_string(units)}, units);
  } else if (ticket != 0) {
    reply = run(conn, "acquire", {id, mode, owner_info_, std::to_string(ticket)});
  } else {
    reply = run(conn, "acquire", {id, mode, owner_info_});
  }
  AcquireReply r = detail::decode_acquire(reply);
  if (r.state == AcquireState::granted && static_cast<long long>(r.slots.size()) != units) {
    // The id was granted before with another number of units (a caller-chosen permit_id).
    throw InvalidArgument(
        fmt::format("fairsem: {}: permit {} is held already with {} units, not the {} asked for",
                    where(), id, r.slots.size(), units));
  }
  return r;
}

FAIRSEM_INLINE void SemaphoreCore::check_units(long long units) const {
  if (units < 1 || units > options_.limit) {
    throw InvalidArgument(
        fmt::format("fairsem: {}: asked for {} units; an acquire takes 1 to {} (the limit)",
                    where(), units, options_.limit));
  }
}

FAIRSEM_INLINE std::unique_ptr<WakeSubscription> SemaphoreCore::subscribe(
    const std::string& id, Connection& conn, std::function<void()> hook, Clock::time_point since) {
  // A waiter's wake-ups come through its Client's inbox of this semaphore (waker.hpp).
  return runtime_->waker(slot_)->subscribe(slot_, keys_[5], id, conn, std::move(hook), since);
}

FAIRSEM_INLINE long long SemaphoreCore::wait_replicas(Connection& conn) {
  // On the socket that wrote, as it is: WAIT counts only that socket's writes, so a WAIT sent
  // again on a new connection (after a reconnect or a redirection) would vouch for nothing.
  // An error reply (UNBLOCKED: the master was demoted meanwhile) acknowledges nothing.
  const Reply acked = conn.command_in_place({"WAIT", min_replicas_arg_, replica_timeout_arg_},
                                            options_.replica_timeout + connection_.command_timeout);
  if (acked.is_error()) {
    log(LogLevel::warning,
        fmt::format("fairsem: {}: WAIT failed ({}); counted as acknowledged by no replica", where(),
                    acked.str));
    return 0;
  }
  return detail::expect_integer(acked, "the WAIT reply");
}

FAIRSEM_INLINE Permit SemaphoreCore::make_permit(const std::string& id, const AcquireReply& reply,
                                                 Clock::time_point sent) {
  // The lease is counted from when the request left, never from this machine's wall clock.
  auto state = std::make_shared<PermitState>(id, reply.ticket, reply.slots, sent + reply.lease);
  // Watched first: if the Client's watchdog cannot start, no orphan entry is left to be renewed
  // forever.
  if (options_.auto_renew && !watched_.load()) {
    runtime_->watchdog().watch(shared_from_this(), renew_interval_);
    watched_.store(true);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_.emplace(state.get(), state);
  }
  observed_.permit_granted(state->count());
  return {user_handle(), std::move(state)};
}

FAIRSEM_INLINE void SemaphoreCore::wake_up_refused(const std::string& error) {
  // The waker's BRPOP was refused: a command the server lacks is said once per semaphore,
  // anything else (an ACL without BRPOP) each time a waiter meets it.
  if (const auto feature = detail::missing_server_feature(error)) {
    if (old_server_reported_.exchange(true)) return;
    std::string server = "of an unknown version";
    try {
      Borrowed conn(*this);
      server = detail::describe_server(*conn);
    } catch (const std::exception&) {
      // Said without the server's name and version.
    }
    log(LogLevel::warning, detail::unsupported_server_message(
                               fmt::format("fairsem: {}: waiting for a wake-up failed", where()),
                               *feature, server, error) +
                               "; its waiters poll instead");
    return;
  }
  log(LogLevel::warning,
      fmt::format("fairsem: {}: waiting for a wake-up failed ({}); polling instead", where(),
                  error));
}

FAIRSEM_INLINE std::exception_ptr SemaphoreCore::acquire_error(AcquireOutcome outcome,
                                                               const std::string& id,
                                                               long long units,
                                                               long long acked) const {
  switch (outcome) {
    case AcquireOutcome::evicted:
      return std::make_exception_ptr(EvictedError(
          fmt::format("fairsem: {}: the queued request {} was evicted (removed on purpose)",
                      where(), id),
          id));
    case AcquireOutcome::too_large:
      return std::make_exception_ptr(RequestTooLargeError(
          fmt::format("fairsem: {}: the queued request {} for {} units was removed from the "
                      "queue: the semaphore was resized to a limit below that, so it could never "
                      "be granted",
                      where(), id, units),
          id, units));
    case AcquireOutcome::replication:
      return std::make_exception_ptr(ReplicationError(
          fmt::format("fairsem: {}: permit {} was granted, but only {} of {} replicas "
                      "acknowledged it within {} ms, so a failover could lose it; {}",
                      where(), id, acked, options_.min_replicas, options_.replica_timeout.count(),
                      options_.permit_id.empty()
                          ? "it was given back and the acquire did not happen"
                          : "the acquire failed, and the caller-chosen permit id is left as it is "
                            "(it expires with its lease unless a holder of that id renews it)"),
          acked, options_.min_replicas));
    default:
      return nullptr;
  }
}

FAIRSEM_INLINE void SemaphoreCore::count_attempt(long long units) noexcept {
  MetricCounters::add(metrics_.acquire_attempts);
  observed_.acquire_started(units);
}

FAIRSEM_INLINE void SemaphoreCore::count_outcome(AcquireOutcome outcome,
                                                 const std::exception_ptr& error,
                                                 Clock::duration waited, long long units) noexcept {
  observed_.acquire_ended(outcome, error, units, waited);
  switch (outcome) {
    case AcquireOutcome::granted:
      metrics_.record_grant(waited, units);
      break;
    case AcquireOutcome::rejected:
      MetricCounters::add(metrics_.rejections);
      break;
    case AcquireOutcome::timed_out:
      MetricCounters::add(metrics_.timeouts);
      break;
    case AcquireOutcome::evicted:
      MetricCounters::add(metrics_.evictions_seen);
      break;
    case AcquireOutcome::cancelled:
      MetricCounters::add(metrics_.cancellations);
      break;
    default:
      // The error as the observer is told it: a full queue (QueueFullError) is a refusal by
      // the server, as a rejection is, which a count of back-pressure takes in.
      switch (Observation::result_of(outcome, error)) {
        case AcquireResult::refused:
          MetricCounters::add(metrics_.rejections);
          break;
        case AcquireResult::cancelled:
          MetricCounters::add(metrics_.cancellations);
          break;
        default:
          MetricCounters::add(metrics_.errors);
      }
  }
}

// --- The asynchronous acquire (AsyncAcquire, async_acquire.hpp) -----------------------------

FAIRSEM_INLINE std::shared_ptr<AsyncAcquire> SemaphoreCore::acquire_async(
    long long units, std::optional<Clock::time_point> deadline, AcquireCallback done) {
  if (!done) throw InvalidArgument("fairsem: an asynchronous acquire needs a callback");
  check_units(units);
  runtime_->owner().check("this Client");  // before anything is posted to threads it lacks
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
  if (on_fairsems_thread() || ConnectionPool::this_thread_holds_a_connection()) return;
  in_flight_->wait_idle();
}

}  // namespace fairsem::detail
