#pragma once

// Renewing held permits: one script call per chunk of permits, by Permit::renew, renew_all and
// the watchdog's renewal lanes (each call bounded by the leases it extends); a permit found gone
// is marked lost. The callbacks of a lane's renewal go to the callback thread (call_back).
// A facet of SemaphoreCore (semaphore_core.hpp).

#include <fmt/format.h>
#include "fairsem/impl/config.hpp"

#include <algorithm>
#include <functional>
#include <string>
#include <utility>

#include "fairsem/impl/scope_exit.hpp"
#include "fairsem/impl/semaphore/semaphore_core.hpp"
#include "fairsem/impl/threads/notifier.hpp"

namespace fairsem::detail {

namespace renewal_helpers {

// Ids per renew call: each costs Redis 2 to 8 µs (tests/bench/renew_bench.cpp), so one call
// stays under a millisecond: every other client of that Redis waits while a script runs.
inline constexpr std::size_t kRenewChunk = 100;

/// permits[begin, end) of a lane's round, as they stand at `now`: those to renew, with the
/// latest of their deadlines, and those whose deadline has passed (released ones left out).
struct LaneChunk {
  std::vector<PermitState*> renew;
  std::vector<PermitState*> overdue;
  Clock::time_point latest;
};
FAIRSEM_INLINE LaneChunk split_chunk(const std::vector<std::shared_ptr<PermitState>>& permits,
                                     std::size_t begin, std::size_t end, Clock::time_point now) {
  LaneChunk chunk;
  chunk.latest = now;
  chunk.renew.reserve(end - begin);
  for (std::size_t i = begin; i < end; ++i) {
    PermitState& state = *permits[i];
    if (state.done.load()) continue;
    const auto deadline = state.get_deadline();
    if (deadline <= now) {
      chunk.overdue.push_back(&state);
    } else {
      chunk.latest = std::max(chunk.latest, deadline);
      chunk.renew.push_back(&state);
    }
  }
  return chunk;
}

}  // namespace renewal_helpers

FAIRSEM_INLINE void SemaphoreCore::call_back(const std::function<void()>& call) const noexcept {
  Notifier* const notifier = Notifier::of_this_thread();
  if (notifier != nullptr) {
    // The task keeps the semaphore (and with it the Client) alive until it has run.
    if (auto self = weak_from_this().lock()) {
      // Its last user handle gone (callback_gate.hpp): its callbacks are over.
      if (!callbacks_->enter()) return;
      // Counted until the task has run, or is dropped unrun (or not posted: out of memory).
      auto leave = [gate = callbacks_] { gate->leave(); };
      using Posted = ScopeExit<decltype(leave)>;
      try {
        std::shared_ptr<Posted> posted;
        try {
          posted = std::make_shared<Posted>(std::move(leave));
        } catch (...) {
          callbacks_->leave();
          throw;
        }
        notifier->post([self = std::move(self), posted = std::move(posted), call] { call(); });
        return;
      } catch (...) {
        // No callback thread could start: called here after all, late rather than never.
      }
    }
  }
  try {
    call();
  } catch (...) {
    // Each call catches what the user's code throws; only running out of memory is left.
  }
}

FAIRSEM_INLINE void SemaphoreCore::mark_lost(PermitState& state, const std::string& reason) {
  if (state.lost.exchange(true)) return;
  MetricCounters::add(metrics_.permits_lost);
  end_permit(state, true);
  forget(state);
  if (!options_.on_lost) {
    log(LogLevel::warning,
        fmt::format("fairsem: {}: permit {} was lost: {}", where(), state.id, reason));
    return;
  }
  call_back([this, id = state.id, reason] {
    try {
      options_.on_lost(id, reason);
    } catch (const std::exception& e) {
      log(LogLevel::error, fmt::format("fairsem: {}: on_lost threw: {}", where(), e.what()));
    } catch (...) {
      log(LogLevel::error, fmt::format("fairsem: {}: on_lost threw", where()));
    }
  });
}

FAIRSEM_INLINE bool SemaphoreCore::renew_chunk(Connection& conn,
                                               const std::vector<PermitState*>& permits) {
  std::vector<std::string> tickets;
  tickets.reserve(permits.size());
  for (const PermitState* p : permits) tickets.push_back(std::to_string(p->ticket));
  Args args;  // id, ticket, id, ticket...
  args.reserve(2 * permits.size());
  for (std::size_t i = 0; i < permits.size(); ++i) {
    args.push_back(permits[i]->id);
    args.push_back(tickets[i]);
  }
  const auto sent = Clock::now();
  detail::RenewReply renewed;
  // With min_replicas, a renewal only counts once replicas have it: a failover to one of them
  // must not bring back an older deadline than the holder believes in.
  std::string unacknowledged;  // why not, when too few replicas acknowledged
  try {
    Reply reply = run(conn, "renew", args);
    renewed = detail::decode_renew(reply, permits.size());
    const long long acked = options_.min_replicas > 0 ? wait_replicas(conn) : 0;
    if (acked < options_.min_replicas) {
      unacknowledged = fmt::format(
          "fairsem: {}: only {} of {} replicas acknowledged the renewal of {} permits within {} "
          "ms; their deadlines stay as they were",
          where(), acked, options_.min_replicas, permits.size(), options_.replica_timeout.count());
      log(LogLevel::warning, unacknowledged);
    }
  } catch (const std::exception& e) {
    renewal_failed(permits, e.what());
    throw;
  }
  const auto deadline = sent + renewed.lease;
  std::vector<PermitState*> unconfirmed;  // still held, but replicas lack the renewal
  std::uint64_t extended = 0;
  for (std::size_t i = 0; i < permits.size(); ++i) {
    PermitState& state = *permits[i];
    if (state.done.load()) continue;
    switch (renewed.states[i]) {
      case detail::RenewState::held:
        if (unacknowledged.empty()) {
          state.set_deadline(deadline);
          ++extended;
        } else {
          unconfirmed.push_back(&state);
        }
        break;
      case detail::RenewState::evicted:
        mark_lost(state, "the permit was evicted (removed on purpose, e.g. by `fairsem evict`)");
        break;
      case detail::RenewState::gone:
        mark_lost(state,
                  "the permit is no longer in Redis (its lease ran out or its keys were removed)");
        break;
      case detail::RenewState::waiting:
        // Only when the slot bookkeeping was rebuilt after keys were changed behind its back.
        mark_lost(state,
                  "the permit's entry is queued again, without a slot (the semaphore's "
                  "keys were changed behind its back)");
        break;
    }
  }
  MetricCounters::add(metrics_.renewals, extended);
  if (unconfirmed.empty()) return true;
  renewal_failed(unconfirmed, unacknowledged);
  return false;
}

FAIRSEM_INLINE void SemaphoreCore::renewal_failed(const std::vector<PermitState*>& permits,
                                                  const std::string& error) noexcept {
  const auto now = Clock::now();
  std::uint64_t failed = 0;
  for (const PermitState* state : permits) {
    if (state->done.load() || state->lost.load()) continue;
    ++failed;
    const auto left = state->get_deadline() - now;
    // A lease already run out is reported as lost instead (by the caller, or at the next try).
    if (!options_.on_renew_failure || left <= Clock::duration::zero()) continue;
    try {
      // As things are now: called on the callback thread, it may come a little later.
      PermitInfo info;
      info.id = state->id;
      info.ticket = state->ticket;
      info.lease_left = std::chrono::ceil<milliseconds>(left);
      info.owner = owner_info_;
      info.tenant = options_.tenant;
      info.slots = state->slots();
      info.count = static_cast<long long>(info.slots.size());
      info.slot = info.slots.empty() ? -1 : info.slots.front();
      call_back([this, info = std::move(info), error] {
        try {
          options_.on_renew_failure(info, error);
        } catch (const std::exception& e) {
          log(LogLevel::error,
              fmt::format("fairsem: {}: on_renew_failure threw: {}", where(), e.what()));
        } catch (...) {
          log(LogLevel::error, fmt::format("fairsem: {}: on_renew_failure threw", where()));
        }
      });
    } catch (...) {
      // Out of memory for the permit's description: the failure is counted and logged.
    }
  }
  MetricCounters::add(metrics_.renewal_failures, failed);
  observed_.renewals_failed(failed);
}

FAIRSEM_INLINE bool SemaphoreCore::renew(PermitState& state) {
  check_process();
  if (state.done.load() || state.lost.load()) return false;
  Borrowed conn(*this);
  (void)renew_chunk(*conn, {&state});  // a deadline that stays as it was is not a lost permit
  return !state.lost.load();
}

FAIRSEM_INLINE std::size_t SemaphoreCore::renew_all() {
  check_process();
  const std::vector<std::shared_ptr<PermitState>> permits = held_permits();
  if (permits.empty()) return 0;
  {
    Borrowed conn(*this);
    std::vector<PermitState*> chunk;
    for (std::size_t begin = 0; begin < permits.size(); begin += renewal_helpers::kRenewChunk) {
      const std::size_t end = std::min(permits.size(), begin + renewal_helpers::kRenewChunk);
      chunk.clear();
      for (std::size_t i = begin; i < end; ++i) chunk.push_back(permits[i].get());
      (void)renew_chunk(*conn, chunk);
    }
  }
  return static_cast<std::size_t>(std::count_if(permits.begin(), permits.end(), [](const auto& p) {
    return !p->done.load() && !p->lost.load();
  }));
}

FAIRSEM_INLINE bool SemaphoreCore::renew_round(
    const RenewalConnect& connect, const std::vector<std::shared_ptr<PermitState>>& permits) {
  bool renewed = true;
  for (std::size_t begin = 0; begin < permits.size(); begin += renewal_helpers::kRenewChunk) {
    const std::size_t end = std::min(permits.size(), begin + renewal_helpers::kRenewChunk);
    renewal_helpers::LaneChunk split =
        renewal_helpers::split_chunk(permits, begin, end, Clock::now());
    // Past its deadline, a permit counts as lost already (Permit::lost); another holder may have
    // it by now. No renewal is sent for it.
    for (PermitState* state : split.overdue) {
      mark_lost(*state, "the lease ran out before a renewal could reach Redis");
    }
    const std::vector<PermitState*>& chunk = split.renew;
    const auto latest = split.latest;
    if (chunk.empty()) continue;
    Connection* conn = nullptr;
    // A call not answered within a quarter of the interval counts as failed, and is reported
    // so (on_renew_failure, renewal_failures) each such time, while it goes on trying until
    // the leases run out: a hung server is warned of before the loss, not only by on_lost.
    const milliseconds every = renewal_retry_delay(renew_interval_);
    const auto sent = Clock::now();
    const std::function<void()> stalled = [&] {
      const std::string error = fmt::format(
          "fairsem: no reply from {} for {} ms; still trying until the leases run out", endpoint_,
          std::chrono::duration_cast<milliseconds>(Clock::now() - sent).count());
      log(LogLevel::warning,
          fmt::format("fairsem: {}: renewing {} permits failed: {}", where(), chunk.size(), error));
      renewal_failed(chunk, error);
    };
    try {
      conn = connect(latest);
      if (conn == nullptr) {
        const std::string error = fmt::format("fairsem: cannot connect to {}", endpoint_);
        renewal_failed(chunk, error);  // renew_chunk reports its own failures
        throw ConnectionError(error);
      }
      conn->set_deadline(latest);
      conn->set_stall_report(every, &stalled);
      if (!renew_chunk(*conn, chunk)) renewed = false;
      conn->set_stall_report(every, nullptr);
      conn->set_deadline(std::nullopt);
    } catch (const std::exception& e) {
      renewed = false;
      if (conn != nullptr) {
        conn->set_stall_report(every, nullptr);
        conn->set_deadline(std::nullopt);
      }
      const auto now = Clock::now();
      log(LogLevel::warning, fmt::format("fairsem: {}: renewing {} permits failed: {}", where(),
                                         chunk.size(), e.what()));
      for (PermitState* state : chunk) {
        if (!state->done.load() && now >= state->get_deadline()) {
          mark_lost(*state, fmt::format("the lease ran out while renewals failed ({})", e.what()));
        }
      }
    }
  }
  return renewed;
}

FAIRSEM_INLINE std::vector<std::shared_ptr<PermitState>> SemaphoreCore::held_permits() {
  std::vector<std::shared_ptr<PermitState>> permits;
  std::lock_guard<std::mutex> lock(mu_);
  permits.reserve(live_.size());
  for (const auto& entry : live_) permits.push_back(entry.second);
  return permits;
}

}  // namespace fairsem::detail
