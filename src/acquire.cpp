// Acquiring: a try (never queues), or a place in the queue and the wait for its wake-up, polled
// when no wake-up comes; giving up leaves the queue. Part of SemaphoreCore (semaphore_core.hpp).

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "fairsem/detail/server_support.hpp"
#include "semaphore_core.hpp"

namespace fairsem::detail {

namespace {

std::string seconds_string(milliseconds ms) {
  return fmt::format("{}.{:03}", ms.count() / 1000, ms.count() % 1000);
}

}  // namespace

AcquireReply SemaphoreCore::run_acquire(Connection& conn, const std::string& id,
                                        std::string_view mode, long long ticket) {
  Reply reply = ticket == 0 ? run(conn, "acquire", {id, mode, owner_info_})
                            : run(conn, "acquire", {id, mode, owner_info_, std::to_string(ticket)});
  return detail::decode_acquire(reply);
}

void SemaphoreCore::throw_evicted(const std::string& id) const {
  throw EvictedError(
      fmt::format("fairsem: {}: the queued request {} was evicted (removed on purpose)", where(),
                  id),
      id);
}

long long SemaphoreCore::wait_replicas(Connection& conn) {
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

void SemaphoreCore::await_replicas(Connection& conn, const std::string& id) {
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

Permit SemaphoreCore::make_permit(const std::string& id, const AcquireReply& reply,
                                  Clock::time_point sent) {
  // The lease is counted from when the request left, never from this machine's wall clock.
  auto state = std::make_shared<PermitState>(id, reply.ticket, reply.slot, sent + reply.lease);
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

std::optional<Permit> SemaphoreCore::try_acquire() {
  const std::string id = next_id();
  Borrowed conn(*this);
  const auto sent = Clock::now();
  AcquireReply reply;
  try {
    reply = run_acquire(*conn, id, "try");
    if (reply.state != AcquireState::granted) return std::nullopt;
    await_replicas(*conn, id);
    return make_permit(id, reply, sent);
  } catch (...) {
    // The grant may have happened with its reply lost, or the permit could not be set up.
    if (options_.permit_id.empty()) give_up(*conn, id, reply.ticket);
    throw;
  }
}

std::optional<Permit> SemaphoreCore::acquire(std::optional<Clock::time_point> deadline) {
  // No time to wait: like try_acquire, never queue.
  if (deadline && *deadline <= Clock::now()) return try_acquire();
  const std::string id = next_id();
  Borrowed conn(*this);  // this waiter's own connection, also for its BRPOP
  auto sent = Clock::now();
  AcquireReply reply;
  try {
    reply = run_acquire(*conn, id, "queue");
    while (reply.state != AcquireState::granted) {
      const auto now = Clock::now();
      if (deadline && now >= *deadline) {
        give_up(*conn, id, reply.ticket);
        return std::nullopt;
      }
      milliseconds wait = poll_interval_;
      if (deadline) {
        const auto left = std::chrono::ceil<milliseconds>(*deadline - now);
        wait = std::max(milliseconds(1), std::min(wait, left));
      }
      if (wait_for_wake_up(*conn, id, wait, reply, sent)) {
        await_replicas(*conn, id);
        return make_permit(id, reply, sent);
      }
      sent = Clock::now();
      reply = run_acquire(*conn, id, "queue", reply.ticket);
      if (reply.state == AcquireState::evicted) throw_evicted(id);
    }
    await_replicas(*conn, id);
    return make_permit(id, reply, sent);
  } catch (const EvictedError&) {
    throw;  // the entry is gone already
  } catch (const ReplicationError&) {
    // A caller-chosen id may be another handle's permit, granted to this call as well: it is
    // left to its lease (as try_acquire does), never given up here.
    if (options_.permit_id.empty()) give_up(*conn, id, reply.ticket);
    throw;
  } catch (...) {
    // Without a ticket (the first call failed) only a random id is surely this call's own: a
    // caller-chosen one may name another handle's entry, which then must not be removed.
    if (reply.ticket != 0 || options_.permit_id.empty()) give_up(*conn, id, reply.ticket);
    throw;
  }
}

std::optional<Permit> SemaphoreCore::measured_acquire(bool wait,
                                                      std::optional<Clock::time_point> deadline) {
  const auto start = Clock::now();
  MetricCounters::add(metrics_.acquire_attempts);
  // A deadline already passed leaves no time to wait (acquire() does not queue then either):
  // finding no permit is a rejection, as for try_acquire, not a timeout.
  const bool queue = wait && !(deadline && *deadline <= start);
  try {
    std::optional<Permit> permit = queue ? acquire(deadline) : try_acquire();
    if (permit) {
      metrics_.record_grant(Clock::now() - start);
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

bool SemaphoreCore::wait_for_wake_up(Connection& conn, const std::string& id, milliseconds wait,
                                     AcquireReply& reply, Clock::time_point sent) {
  try {
    // Woken by the release (or reap) that promotes this waiter; on timeout the acquire after
    // it renews the queue entry and reports promotion, so a lost wake-up costs one poll.
    const Reply woken = conn.command({"BRPOP", keys_[5] + id, seconds_string(wait)},
                                     wait + connection_.command_timeout);
    const detail::WakeUp wake_up = detail::decode_wake(woken);
    const detail::WakeReason why = wake_up.reason;
    // An eviction already removed the entry; its marker is consumed here.
    if (why == detail::WakeReason::evicted) throw_evicted(id);
    reply.slot = wake_up.slot;
    // Promoted: the permit is this entry, with the deadline its last call set (estimated from
    // when that call was sent). Taken as it is when the watchdog's next round surely comes with
    // half the usual margin left (and room for the WAIT of min_replicas); otherwise the poll
    // renews it first. With min_replicas, the WAIT must follow a write of this socket: a
    // wake-up popped on another node (an ASK during a slot migration) is confirmed by the poll.
    return why == detail::WakeReason::promoted &&
           sent + reply.lease - Clock::now() > direct_grant_margin_ + wait_allowance_ &&
           !(options_.min_replicas > 0 && conn.last_reply_elsewhere());
  } catch (const ConnectionError&) {
    // The poll reconnects, or reports why it cannot.
  } catch (const ReplyError& e) {
    // BRPOP refused. A transient refusal (a restarted server still loading, a cluster without
    // this slot's shard for a moment) goes straight to the poll, which retries it with backoff:
    // sleeping first would leave a promoted waiter unaware of its permit. Anything else (a
    // foreign key in the way) waits as long as the wake-up could have taken, then polls as on
    // a timeout.
    // A server too old for BRPOP's fractional timeout (Redis < 6.0) is said once; its waiters
    // poll.
    if (const auto feature = detail::missing_server_feature(e.server_message())) {
      if (!old_server_reported_.exchange(true)) {
        log(LogLevel::warning,
            detail::unsupported_server_message(
                fmt::format("fairsem: {}: waiting for a wake-up failed", where()), *feature,
                detail::describe_server(conn), e.server_message()) +
                "; its waiters poll instead");
      }
      std::this_thread::sleep_for(wait);
    } else if (!is_transient(e.server_message())) {
      log(LogLevel::warning,
          fmt::format("fairsem: {}: waiting for a wake-up failed ({}); polling instead", where(),
                      e.what()));
      std::this_thread::sleep_for(wait);
    }
  }
  return false;
}

void SemaphoreCore::give_up(Connection& conn, const std::string& id, long long ticket) noexcept {
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
