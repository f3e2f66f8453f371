#pragma once

// Acquiring: the blocking acquire, which drives an acquire's state machine (acquire_fsm.hpp) on
// the calling thread; the I/O that machine asks for (AcquireIo, acquire.hpp), shared with
// AsyncAcquire; and the calls of SemaphoreCore that I/O makes (semaphore_core.hpp).

#include <fmt/format.h>
#include "fairsem/impl/config.hpp"

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <utility>

#include "fairsem/impl/protocol/server_support.hpp"
#include "fairsem/impl/scope_exit.hpp"
#include "fairsem/impl/semaphore/acquire_io.hpp"
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

// --- AcquireIo ----------------------------------------------------------------------------

FAIRSEM_INLINE AcquireIo::AcquireIo(SemaphoreCore& core, long long units)
    : core_(core), units_(units), id_(core.next_id()) {}

FAIRSEM_INLINE AcquireIo::~AcquireIo() = default;

FAIRSEM_INLINE AcquireEvent AcquireIo::perform(const AcquireAction& action) {
  using Kind = AcquireAction::Kind;
  if (action.kind == Kind::send_try || action.kind == Kind::send_queue ||
      action.kind == Kind::poll) {
    return call(action);
  }
  try {
    switch (action.kind) {
      case Kind::subscribe:
        wake_up_ = core_.subscribe(id_, conn(), hook_, sent_);
        break;
      case Kind::rearm:
        // A wake-up delivered while the poll was out stays (WakeSubscription::rearm): the next
        // wait reads it, against the ticket the poll's reply gave.
        wake_up_->rearm(conn(), sent_);
        break;
      case Kind::await_replicas:
        wake_up_.reset();
        acked_ = core_.wait_replicas(conn());
        return AcquireEvent::replicas(acked_, Clock::now());
      case Kind::grant:
        wake_up_.reset();
        permit_ = core_.make_permit(id_, action.reply, action.sent);
        break;
      case Kind::leave:
        wake_up_.reset();
        // A failure is the machine's to judge, not the acquire's error: that stays.
        if (const std::exception_ptr failed = core_.leave(conn_, id_, action.ticket)) {
          return AcquireEvent::failed(true, Clock::now(), detail::passes(failed));
        }
        break;
      case Kind::leave_later:
        wake_up_.reset();
        core_.leave_later(id_, action.ticket, action.until.value_or(Clock::now()));
        break;
      case Kind::report:
        core_.wake_up_refused(action.error);
        break;
      default:
        break;  // waiting and finishing are the driver's
    }
  } catch (...) {
    error_ = std::current_exception();
    return AcquireEvent::failed(true, Clock::now(), detail::passes(error_));
  }
  return AcquireEvent::done(Clock::now());
}

FAIRSEM_INLINE AcquireEvent AcquireIo::call(const AcquireAction& action) {
  bool reached = false;
  try {
    // A connection of the pool for each call, none while waiting: the wake-up comes through the
    // Client's waker. Borrowed and connected first (an idle one to a server that went away,
    // again), by the deadline, so that a failure to connect leaves nothing to undo.
    if (!conn_) conn_.emplace(core_, action.until);
    Connection& c = **conn_;
    const ScopeExit interruptible([&c] { c.set_interrupt(nullptr); });
    c.set_interrupt(&interrupted_);
    c.connect_by(action.until);
    reached = true;
    const auto sent = Clock::now();
    sent_ = sent;
    AcquireReply reply =
        core_.run_acquire(c, id_, action.kind == AcquireAction::Kind::send_try ? "try" : "queue",
                          units_, action.ticket, action.fresh);
    turn_.reset();  // the ticket is drawn: the next request may draw its own
    return AcquireEvent::replied(std::move(reply), sent, Clock::now());
  } catch (const QueueFullError&) {
    // Refused before writing anything: no entry to leave.
    turn_.reset();
    error_ = std::current_exception();
    return AcquireEvent::failed(false, Clock::now(), false);
  } catch (...) {
    turn_.reset();  // the first call failed: the next request need not wait for the clean-up
    error_ = std::current_exception();
    // A broken connection goes back to the pool as it is: the next call reconnects it.
    return AcquireEvent::failed(reached, Clock::now(), detail::passes(error_));
  }
}

FAIRSEM_INLINE Connection& AcquireIo::conn() {
  if (!conn_) conn_.emplace(core_);
  return **conn_;
}

FAIRSEM_INLINE AcquireEvent AcquireIo::wait(Clock::time_point until) {
  let_go();
  // Woken by the release (or reap) that promotes this waiter; when nothing comes the machine
  // polls, which renews the queue entry and reports promotion, so a lost wake-up costs one poll.
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
  if (wake_up_ && left > std::chrono::milliseconds(0)) {
    if (auto came = event_of(wake_up_->wait_for(left))) return std::move(*came);
  } else if (auto came = take()) {
    return std::move(*came);
  } else if (left > std::chrono::milliseconds(0)) {
    std::this_thread::sleep_for(left);  // nothing to listen to: only time can come
  }
  return AcquireEvent::tick(Clock::now());
}

FAIRSEM_INLINE std::optional<AcquireEvent> AcquireIo::take() {
  if (!wake_up_) return std::nullopt;
  return event_of(wake_up_->take());
}

FAIRSEM_INLINE std::optional<AcquireEvent> AcquireIo::event_of(WakeWait waited) {
  const auto now = Clock::now();
  if (waited.woken) {
    try {
      return AcquireEvent::woken(detail::decode_wake(*waited.woken), now);
    } catch (...) {
      error_ = std::current_exception();
      return AcquireEvent::failed(true, now);
    }
  }
  if (waited.interrupted) return AcquireEvent::interrupted(now);
  if (waited.error.empty()) return std::nullopt;
  const bool transient = is_transient(waited.error);
  return AcquireEvent::refused(std::move(waited.error), transient, now);
}

FAIRSEM_INLINE void AcquireIo::let_go() noexcept {
  conn_.reset();
  turn_.reset();
}

FAIRSEM_INLINE std::exception_ptr AcquireIo::error(AcquireOutcome outcome) const {
  if (outcome != AcquireOutcome::failed) return core_.acquire_error(outcome, id_, units_, acked_);
  if (error_) return error_;
  return std::make_exception_ptr(std::logic_error("fairsem: an acquire failed with no error"));
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
  if (mode == "queue" || idle_expiry_ms_ > 0 || fresh) {
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
    Args args{id, mode, owner_info_, ticket_arg, units_arg, client};
    if (options_.max_waiters > 0 || idle_expiry_ms_ > 0 || fresh) {
      args.push_back(max_waiters);
    }
    if (idle_expiry_ms_ > 0 || fresh) args.push_back(expiry_arg_);
    if (fresh) args.push_back("1");
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
      MetricCounters::add(metrics_.errors);
  }
}

}  // namespace fairsem::detail
