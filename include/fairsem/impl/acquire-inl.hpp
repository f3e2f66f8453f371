#pragma once

// Acquiring: a try (never queues), or a place in the queue and the wait for its wake-up, polled
// when no wake-up comes; giving up leaves the queue. Part of SemaphoreCore (semaphore_core.hpp).

#include <fmt/format.h>
#include "fairsem/impl/config.hpp"

#include <algorithm>
#include <utility>

#include "fairsem/impl/semaphore_core.hpp"
#include "fairsem/impl/server_support.hpp"
#include "fairsem/impl/thread_reaper.hpp"

namespace fairsem::detail {

FAIRSEM_INLINE AcquireReply SemaphoreCore::run_acquire(Connection& conn, const std::string& id,
                                                       std::string_view mode, long long units,
                                                       long long ticket) {
  Reply reply;
  if (mode == "queue") {
    // A waiter's wake-ups come through its Client's inbox of this semaphore (waker.hpp).
    const std::string& client = runtime_->waker(slot_, keys_[5])->client();
    reply =
        run(conn, "acquire",
            {id, mode, owner_info_, std::to_string(ticket), std::to_string(units), client}, units);
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

FAIRSEM_INLINE void SemaphoreCore::throw_evicted(const std::string& id) const {
  throw EvictedError(
      fmt::format("fairsem: {}: the queued request {} was evicted (removed on purpose)", where(),
                  id),
      id);
}

FAIRSEM_INLINE void SemaphoreCore::throw_if_removed(const AcquireReply& reply,
                                                    const std::string& id, long long units) const {
  if (reply.state == AcquireState::evicted) throw_evicted(id);
  if (reply.state == AcquireState::too_large) throw_too_large(id, units);
}

FAIRSEM_INLINE void SemaphoreCore::throw_too_large(const std::string& id, long long units) const {
  throw RequestTooLargeError(
      fmt::format("fairsem: {}: the queued request {} for {} units was removed from the queue: "
                  "the semaphore was resized to a limit below that, so it could never be granted",
                  where(), id, units),
      id, units);
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

FAIRSEM_INLINE void SemaphoreCore::await_replicas(Connection& conn, const std::string& id) {
  if (options_.min_replicas == 0) return;
  const long long acked = wait_replicas(conn);
  if (acked >= options_.min_replicas) return;
  throw ReplicationError(
      fmt::format("fairsem: {}: permit {} was granted, but only {} of {} replicas acknowledged "
                  "it within {} ms, so a failover could lose it; {}",
                  where(), id, acked, options_.min_replicas, options_.replica_timeout.count(),
                  options_.permit_id.empty()
                      ? "it was given back and the acquire did not happen"
                      : "the acquire failed, and the caller-chosen permit id is left as it is "
                        "(it expires with its lease unless a holder of that id renews it)"),
      acked, options_.min_replicas);
}

FAIRSEM_INLINE Permit SemaphoreCore::make_permit(const std::string& id, const AcquireReply& reply,
                                                 Clock::time_point sent) {
  // The lease is counted from when the request left, never from this machine's wall clock.
  auto state = std::make_shared<PermitState>(id, reply.ticket, reply.slots, sent + reply.lease);
  // Watched first: if the Client's watchdog cannot start, no orphan entry is left to be renewed
  // forever.
  if (options_.auto_renew && !watched_.load()) {
    runtime_->watch(shared_from_this(), renew_interval_);
    watched_.store(true);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_.emplace(state.get(), state);
  }
  return {shared_from_this(), std::move(state)};
}

FAIRSEM_INLINE std::optional<AdmissionTurn> SemaphoreCore::wait_turn(
    std::optional<Clock::time_point> deadline) {
  if (on_fairsems_thread() || Runtime::this_thread_holds_a_connection()) return AdmissionTurn();
  return admission_->wait(deadline);
}

FAIRSEM_INLINE std::optional<Permit> SemaphoreCore::try_acquire(long long units) {
  std::optional<AdmissionTurn> turn = wait_turn(std::nullopt);
  return try_acquire_admitted(units, *turn);
}

FAIRSEM_INLINE std::optional<Permit> SemaphoreCore::try_acquire_admitted(long long units,
                                                                         AdmissionTurn& turn) {
  const std::string id = next_id();
  Borrowed conn(*this);
  const auto sent = Clock::now();
  AcquireReply reply;
  try {
    reply = run_acquire(*conn, id, "try", units);
    turn.done();
    if (reply.state != AcquireState::granted) return std::nullopt;
    await_replicas(*conn, id);
    return make_permit(id, reply, sent);
  } catch (...) {
    turn.done();
    // The grant may have happened with its reply lost, or the permit could not be set up.
    if (options_.permit_id.empty()) give_up(*conn, id, reply.ticket);
    throw;
  }
}

FAIRSEM_INLINE std::optional<Permit> SemaphoreCore::acquire(
    long long units, std::optional<Clock::time_point> deadline) {
  // No time to wait: like try_acquire, never queue.
  if (deadline && *deadline <= Clock::now()) return try_acquire(units);
  // Behind the requests made before this one (admission.hpp); the deadline may pass in line,
  // before anything was sent.
  std::optional<AdmissionTurn> turn = wait_turn(deadline);
  if (!turn) return std::nullopt;
  const std::string id = next_id();
  // A connection of the pool for each call, none while waiting: the wake-up comes through the
  // Client's waker. Borrowed here first, so that a failure to connect leaves nothing to undo.
  std::optional<Borrowed> conn;
  conn.emplace(*this);
  auto sent = Clock::now();
  AcquireReply reply;
  std::unique_ptr<WakeSubscription> wake_up;
  try {
    reply = run_acquire(**conn, id, "queue", units);
    turn->done();  // the ticket is drawn: the next request may draw its own
    if (reply.state != AcquireState::granted) {
      wake_up = runtime_->waker(slot_, keys_[5])->subscribe(keys_[5], id, **conn);
    }
    while (reply.state != AcquireState::granted) {
      conn.reset();
      const auto now = Clock::now();
      if (deadline && now >= *deadline) {
        wake_up.reset();
        leave(conn, id, reply.ticket);
        return std::nullopt;
      }
      milliseconds wait = poll_interval_;
      if (deadline) {
        const auto left = std::chrono::ceil<milliseconds>(*deadline - now);
        wait = std::max(milliseconds(1), std::min(wait, left));
      }
      if (wait_for_wake_up(*wake_up, id, units, wait, reply, sent)) {
        return make_permit(id, reply, sent);
      }
      conn.emplace(*this);
      sent = Clock::now();
      reply = run_acquire(**conn, id, "queue", units, reply.ticket);
      throw_if_removed(reply, id, units);
      // Still queued: a wake-up popped before this reply is older than what the poll saw.
      if (reply.state != AcquireState::granted) wake_up->rearm(**conn);
    }
    wake_up.reset();
    // With min_replicas, on the connection whose call granted (or confirmed) the permit.
    await_replicas(**conn, id);
    return make_permit(id, reply, sent);
  } catch (const EvictedError&) {
    throw;  // the entry is gone already
  } catch (const RequestTooLargeError&) {
    throw;  // likewise
  } catch (const ReplicationError&) {
    // A caller-chosen id may be another handle's permit, granted to this call as well: it is
    // left to its lease (as try_acquire does), never given up here.
    if (options_.permit_id.empty()) leave(conn, id, reply.ticket);
    throw;
  } catch (...) {
    turn->done();  // the first call failed: the next request need not wait for the clean-up
    // Without a ticket (the first call failed) only a random id is surely this call's own: a
    // caller-chosen one may name another handle's entry, which then must not be removed.
    if (reply.ticket != 0 || options_.permit_id.empty()) leave(conn, id, reply.ticket);
    throw;
  }
}

FAIRSEM_INLINE void SemaphoreCore::leave(std::optional<Borrowed>& conn, const std::string& id,
                                         long long ticket) noexcept {
  try {
    if (!conn) conn.emplace(*this);
  } catch (const std::exception& e) {
    log(LogLevel::warning, fmt::format("fairsem: {}: could not leave the queue ({}); the entry "
                                       "expires within one lease",
                                       where(), e.what()));
    return;
  }
  give_up(**conn, id, ticket);
}

FAIRSEM_INLINE std::optional<Permit> SemaphoreCore::measured_acquire(
    long long units, bool wait, std::optional<Clock::time_point> deadline) {
  check_units(units);
  const auto start = Clock::now();
  MetricCounters::add(metrics_.acquire_attempts);
  // A deadline already passed leaves no time to wait (acquire() does not queue then either):
  // finding no permit is a rejection, as for try_acquire, not a timeout.
  const bool queue = wait && !(deadline && *deadline <= start);
  try {
    std::optional<Permit> permit = queue ? acquire(units, deadline) : try_acquire(units);
    if (permit) {
      metrics_.record_grant(Clock::now() - start, units);
    } else {
      MetricCounters::add(queue ? metrics_.timeouts : metrics_.rejections);
    }
    return permit;
  } catch (const EvictedError&) {
    MetricCounters::add(metrics_.evictions_seen);
    throw;
  } catch (...) {
    MetricCounters::add(metrics_.errors);
    throw;
  }
}

FAIRSEM_INLINE bool SemaphoreCore::wait_for_wake_up(WakeSubscription& wake_up,
                                                    const std::string& id, long long units,
                                                    milliseconds wait, AcquireReply& reply,
                                                    Clock::time_point sent) {
  // Woken by the release (or reap) that promotes this waiter; on timeout the acquire after it
  // renews the queue entry and reports promotion, so a lost wake-up costs one poll.
  const auto until = Clock::now() + wait;
  bool reported = false;
  for (;;) {
    const auto left = std::chrono::ceil<milliseconds>(until - Clock::now());
    if (left <= milliseconds(0)) return false;
    const WakeWait waited = wake_up.wait_for(left);
    if (waited.woken) return take_wake_up(*waited.woken, id, units, reply, sent);
    if (waited.interrupted) return false;    // a wake-up may be lost: poll now
    if (waited.error.empty()) return false;  // no wake-up within `wait`: poll
    // A transient refusal goes straight to the poll; after any other the wait goes on: a
    // wake-up can still come, and the poll follows as on a timeout.
    if (is_transient(waited.error)) return false;
    if (!std::exchange(reported, true)) wake_up_refused(waited.error);
  }
}

FAIRSEM_INLINE bool SemaphoreCore::take_wake_up(const Reply& woken_reply, const std::string& id,
                                                long long units, AcquireReply& reply,
                                                Clock::time_point sent) {
  detail::WakeUp woken = detail::decode_wake(woken_reply);
  // An eviction already removed the entry; its marker was consumed by the waker.
  if (woken.reason == detail::WakeReason::evicted) throw_evicted(id);
  if (woken.reason == detail::WakeReason::too_large) throw_too_large(id, units);
  // A wake-up for another ticket is an earlier entry's, popped before this one was queued but
  // read only now: poll (the poll tells where this entry stands). So is one with another
  // number of slots.
  if (woken.ticket != reply.ticket || static_cast<long long>(woken.slots.size()) != units) {
    return false;
  }
  reply.slots = std::move(woken.slots);
  // Promoted: the permit is this entry, with the deadline its last call set (estimated from
  // when that call was sent). Taken as it is when the watchdog's next round surely comes with
  // half the usual margin left; otherwise the poll renews it first. With min_replicas the poll
  // always comes first: its WAIT must follow a write of the connection it runs on, and the
  // wake-up was popped on the waker's.
  return woken.reason == detail::WakeReason::promoted && options_.min_replicas == 0 &&
         sent + reply.lease - Clock::now() > direct_grant_margin_;
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

FAIRSEM_INLINE void SemaphoreCore::give_up(Connection& conn, const std::string& id,
                                           long long ticket) noexcept {
  // Removes the queue entry and the wake list; if the waiter was promoted a moment ago, this
  // frees the permit and wakes the next waiter.
  try {
    const std::string ticket_arg = std::to_string(ticket);
    run(conn, "release", {id, ticket_arg, receipt_arg_, "leaving"});
  } catch (const std::exception& e) {
    log(LogLevel::warning, fmt::format("fairsem: {}: could not leave the queue ({}); the entry "
                                       "expires within one lease",
                                       where(), e.what()));
  }
}

}  // namespace fairsem::detail
