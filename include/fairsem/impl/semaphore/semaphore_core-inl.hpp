#pragma once

// SemaphoreCore (semaphore_core.hpp): set-up, the script calls, release and the admin calls.
// Its other facets are in semaphore_core_*-inl.hpp.

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/semaphore/semaphore_core.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "fairsem/impl/protocol/scripts.hpp"
#include "fairsem/impl/protocol/server_support.hpp"
#include "fairsem/impl/text.hpp"
#include "fairsem/impl/threads/notifier.hpp"
#include "fairsem/impl/threads/thread_reaper.hpp"

namespace fairsem::detail {

namespace semaphore_core_helpers {

// A script whose reply was lost is run again (it is idempotent per permit id).
constexpr int kScriptAttempts = 3;
// A release is retried once (Permit::release): the caller waits for it, and a permit whose
// release fails expires with its lease all the same.
constexpr int kReleaseAttempts = 2;
// How often a call whose caller asked for `asked` attempts (0: the default) is run.
constexpr int script_attempts(int asked) { return asked > 0 ? asked : kScriptAttempts; }
// Transient refusals (is_transient) are retried with backoff this often.
constexpr int kTransientAttempts = 12;
constexpr auto kTransientBackoffMax = std::chrono::milliseconds(500);

/// Long enough for every retry of a release to find the receipt of a run whose reply was lost:
/// each attempt may wait for a reply and then reconnect with backoff.
FAIRSEM_INLINE milliseconds receipt_lifetime(const ConnectionOptions& c, milliseconds lease) {
  const auto reconnect = c.reconnect_attempts * (c.connect_timeout + c.reconnect_backoff_max);
  return std::max(lease, kScriptAttempts * (c.command_timeout + reconnect));
}

}  // namespace semaphore_core_helpers

FAIRSEM_INLINE bool is_transient(std::string_view server_message) noexcept {
  return detail::starts_with(server_message, "LOADING") ||
         detail::starts_with(server_message, "BUSY ") ||
         detail::starts_with(server_message, "MASTERDOWN") ||
         // Redis Cluster: a slot being migrated, or a cluster that lost a shard for a moment.
         detail::starts_with(server_message, "TRYAGAIN") ||
         detail::starts_with(server_message, "CLUSTERDOWN");
}

FAIRSEM_INLINE SemaphoreCore::SemaphoreCore(std::shared_ptr<Runtime> runtime, std::string name,
                                            SemaphoreOptions options, bool admin)
    : runtime_(std::move(runtime)),
      connection_(runtime_->options()),
      name_((validate_name(name, "semaphore name"), std::move(name))),
      options_((options.validate(), std::move(options))),
      endpoint_(connection_.endpoint()),
      where_(fmt::format("semaphore '{}' on {}", name_, endpoint_)),
      owner_info_(options_.owner_info.empty() ? default_owner_info() : options_.owner_info),
      limit_arg_(admin ? std::string("0") : std::to_string(options_.limit)),
      lease_arg_(std::to_string(options_.lease.count())),
      idle_expiry_ms_(options_.idle_expiry.count()),
      receipt_arg_(std::to_string(
          semaphore_core_helpers::receipt_lifetime(connection_, options_.lease).count())),
      min_replicas_arg_(std::to_string(options_.min_replicas)),
      replica_timeout_arg_(std::to_string(options_.replica_timeout.count())),
      renew_interval_(options_.effective_renew_interval()),
      poll_interval_(std::max(milliseconds(1), std::min(options_.lease / 3, renew_interval_))),
      direct_grant_margin_(renew_interval_ + (options_.lease - renew_interval_) / 2),
      wait_allowance_(options_.min_replicas > 0 ? options_.replica_timeout : milliseconds(0)) {
  keys_ = detail::semaphore_keys(options_.key_prefix, name_);
  for (const std::string& k : keys_) key_args_.push_back(k);
  // A cluster routes by the keys' hash slot. Through Sentinel one master serves every slot:
  // every semaphore uses slot 0, so that they share one wake-up path, one watchdog connection
  // and the pool's connections, as on a single server.
  if (connection_.cluster) {
    slot_ = detail::key_slot(keys_[0]);
  } else if (connection_.routed()) {
    slot_ = 0;
  }
  if (admin) return;
  admission_ = runtime_->admission(keys_[0]);
  observed_ = Observation(
      options_.metrics_observer ? options_.metrics_observer : runtime_->metrics_observer(), name_);
}

FAIRSEM_INLINE SemaphoreCore::UserHandles::~UserHandles() {
  core->callbacks_->close(!on_fairsems_thread() &&
                          !ConnectionPool::this_thread_holds_a_connection());
}

FAIRSEM_INLINE std::shared_ptr<SemaphoreCore> SemaphoreCore::user_handle() {
  std::lock_guard<std::mutex> lock(handles_mu_);
  std::shared_ptr<UserHandles> handles = handles_.lock();
  if (!handles) {
    handles = std::make_shared<UserHandles>(shared_from_this());
    handles_ = handles;
    callbacks_->reopen();
  }
  // Points to this semaphore, and shares the ownership of the handles.
  return {handles, this};
}

FAIRSEM_INLINE void SemaphoreCore::log(LogLevel level, const std::string& message) const noexcept {
  // Off unless the application asked: a library does not write to its host's stderr.
  if (!options_.logger) return;
  const auto write = [this, level](const std::string& text) noexcept {
    try {
      options_.logger(level, text);
    } catch (...) {
      // A logger that throws must not turn a destructor into std::terminate.
    }
  };
  // On a renewal lane, the logger is user code like on_lost: it runs on the callback thread.
  if (Notifier::of_this_thread() != nullptr) {
    try {
      call_back([write, message] { write(message); });
      return;
    } catch (...) {
      // Out of memory for the message's copy: written here.
    }
  }
  write(message);
}

FAIRSEM_INLINE std::unique_ptr<Connection> SemaphoreCore::take_connection(
    std::optional<Clock::time_point> deadline) {
  auto conn = runtime_->pool().take(slot_, deadline);
  conn->count_reconnects(metrics_.reconnects);
  return conn;
}

FAIRSEM_INLINE Reply SemaphoreCore::run(Connection& conn, std::string_view op, const Args& extra,
                                        long long units, bool fresh, int attempts) {
  attempts = semaphore_core_helpers::script_attempts(attempts);
  Args args;
  args.reserve(3 + extra.size());
  args.push_back(op);
  args.push_back(limit_arg_);
  args.push_back(lease_arg_);
  args.insert(args.end(), extra.begin(), extra.end());
  Reply reply;
  auto backoff = std::chrono::milliseconds(20);
  for (int attempt = 1, transient = 1;; ++attempt) {
    try {
      // With min_replicas the script must run on `conn` itself, never in another thread's batch:
      // the WAIT that follows on `conn` counts only that socket's writes.
      const Script& script = detail::scripts::semaphore_script(op);
      bool batched = false;
      reply = options_.min_replicas > 0 ? conn.eval(script, key_args_, args)
                                        : runtime_->eval(conn, script, key_args_, args, &batched);
      if (batched) {
        MetricCounters::add(metrics_.batched_calls);
        observed_.call_batched();
      }
      break;
    } catch (const AuthError&) {
      throw;
    } catch (const ConnectionError& e) {
      // The script may have run and only its reply been lost; every operation is idempotent
      // per permit id, so running it again cannot grant or free a second permit. Not once the
      // connection's deadline (a renewal's leases) has passed: too late to be of use.
      if (attempt >= attempts || conn.deadline_passed()) throw;
      // The lost run may have queued or granted the id: it is no longer fresh.
      if (fresh) args.at(kAcquireFreshArg) = "0";
      log(LogLevel::warning,
          fmt::format("fairsem: {}: {} interrupted ({}); running it again", where(), op, e.what()));
    } catch (const ReplyError& e) {
      if (is_transient(e.server_message()) &&
          transient < semaphore_core_helpers::kTransientAttempts && !conn.deadline_passed()) {
        // The script did not run; waiting does not use up the lost-reply attempts.
        ++transient;
        --attempt;
        std::this_thread::sleep_for(conn.capped(backoff));
        backoff = std::min(backoff * 2,
                           std::chrono::milliseconds(semaphore_core_helpers::kTransientBackoffMax));
        continue;
      }
      if (const auto feature = detail::missing_server_feature(e.server_message())) {
        throw ReplyError(detail::unsupported_server_message(
                             fmt::format("fairsem: {}: {} failed", where(), op), *feature,
                             detail::describe_server(conn), e.server_message()),
                         e.server_message());
      }
      throw ReplyError(fmt::format("fairsem: {}: {} failed: {}", where(), op, e.server_message()),
                       e.server_message());
    }
  }
  detail::check_script_reply(reply, {where_, keys_[3], options_.limit, units, options_.max_waiters,
                                     options_.idle_expiry.count()});
  return reply;
}

FAIRSEM_INLINE void SemaphoreCore::connect() {
  Borrowed conn(*this);  // connects now, so a bad address or password is reported here
}

FAIRSEM_INLINE void SemaphoreCore::open() {
  if (connection_.tls.enabled && connection_.tls.insecure) {
    log(LogLevel::warning,
        fmt::format("fairsem: {}: TLS certificate verification is off (insecure): any server "
                    "can pose as this one",
                    where()));
  }
  Borrowed conn(*this);
  const std::string asked = std::to_string(idle_expiry_ms_.load());
  const long long stored = detail::decode_open(run(*conn, "open", {asked}));
  // idle_expiry 0: none asked; then the one stored is followed, and passed on from now on.
  long long none = 0;
  if (stored > 0) idle_expiry_ms_.compare_exchange_strong(none, stored);
  observed_.limit_set(options_.limit);
  // Run as a function, open has loaded the whole library. Run as a script, it is in the
  // server's cache now, and the others go there in one round trip, so that no acquire or
  // release pays for a NOSCRIPT first. A refusal (an ACL without SCRIPT LOAD, a flushed cache
  // later) costs only that: each script is loaded again on NOSCRIPT.
  if (conn->runs_functions()) return;
  std::vector<Args> loads;
  for (const Script* script : scripts::semaphore_scripts) {
    if (script != &scripts::semaphore_open) loads.push_back({"SCRIPT", "LOAD", script->body});
  }
  try {
    (void)conn->pipeline(loads);
  } catch (const Error&) {
    // The semaphore is open: a connection lost now is found (and replaced) by the next call.
  }
}

FAIRSEM_INLINE void SemaphoreCore::forget(PermitState& state) {
  std::lock_guard<std::mutex> lock(mu_);
  live_.erase(&state);
}

FAIRSEM_INLINE ReleaseResult SemaphoreCore::release(PermitState& state) {
  check_process();
  if (state.done.exchange(true)) return ReleaseResult::already_released;
  forget(state);
  // Told before the call, which may hand its units to another thread of this process at once
  // (MetricsObserver::permit_ended). A failed call drops the permit: its entry expires with
  // its lease.
  end_permit(state, state.lost.load());
  // Known lost (found gone or evicted by a renewal, or its lease ran out while renewals
  // failed): its entry is gone, or its lease is over and the next call of any client reaps
  // it, or the id holds someone else's ticket now. A call frees nothing then, and against a
  // hung server it would only make the caller wait (`fairsem run --on-lost kill` after its
  // command died): none is sent.
  if (state.lost.load()) return ReleaseResult::expired;
  Reply reply = [&] {
    Borrowed conn(*this);
    const std::string ticket = std::to_string(state.ticket);
    return run(*conn, "release", {state.id, ticket, receipt_arg_}, 1, false,
               semaphore_core_helpers::kReleaseAttempts);
  }();
  // released_before: an earlier run whose reply was lost released it (it left a receipt).
  if (detail::decode_release(reply) != detail::ReleaseState::not_present) {
    MetricCounters::add(metrics_.releases);
    MetricCounters::add(metrics_.units_released, static_cast<std::uint64_t>(state.count()));
    return ReleaseResult::released;
  }
  // Gone before anyone noticed (e.g. an expired lease without auto_renew): lost all the same.
  if (!state.lost.exchange(true)) {
    MetricCounters::add(metrics_.permits_lost);
    observed_.permit_lost_at_release();
  }
  return ReleaseResult::expired;
}

FAIRSEM_INLINE ReleaseResult SemaphoreCore::release_units(PermitState& state, long long units) {
  check_process();
  if (state.done.load()) return ReleaseResult::already_released;
  const long long count = state.count();
  if (units < 1 || units > count) {
    throw InvalidArgument(
        fmt::format("fairsem: {}: permit {} holds {} units; release gives back "
                    "1 to {} of them, got {}",
                    where(), state.id, count, count, units));
  }
  // All of them, or a permit known lost (dropped without a call, as release() drops it).
  if (units == count || state.lost.load()) return release(state);
  const long long keep = count - units;
  // Told before the call, as release() tells it; a call that fails gives nothing back.
  state.told_units.fetch_sub(units);
  observed_.units_released(units);
  Reply reply = [&] {
    Borrowed conn(*this);
    return run(*conn, "release",
               {state.id, std::to_string(state.ticket), receipt_arg_, "keep", std::to_string(keep)},
               1, false, semaphore_core_helpers::kReleaseAttempts);
  }();
  if (detail::decode_release(reply) == detail::ReleaseState::holder_released) {
    state.keep_slots(static_cast<std::size_t>(keep));
    MetricCounters::add(metrics_.releases);
    MetricCounters::add(metrics_.units_released, static_cast<std::uint64_t>(units));
    return ReleaseResult::released;
  }
  // Gone before anyone noticed: the whole permit is lost, and dropped as release() drops it.
  if (state.done.exchange(true)) return ReleaseResult::already_released;
  forget(state);
  if (!state.lost.exchange(true)) MetricCounters::add(metrics_.permits_lost);
  end_permit(state, true);
  return ReleaseResult::expired;
}

FAIRSEM_INLINE Status SemaphoreCore::status() {
  Reply reply = [&] {
    Borrowed conn(*this);
    return run(*conn, "status", {});
  }();
  return detail::decode_status(reply);
}

FAIRSEM_INLINE Status SemaphoreCore::status_on(Connection& conn) {
  return detail::decode_status(run(conn, "status", {}));
}

FAIRSEM_INLINE EvictResult SemaphoreCore::evict(const std::string& permit_id) {
  validate_name(permit_id, "permit id");
  Reply reply = [&] {
    Borrowed conn(*this);
    return run(*conn, "evict", {permit_id});
  }();
  return detail::decode_evict(reply);
}

FAIRSEM_INLINE ResizeResult SemaphoreCore::resize(long long new_limit) {
  if (new_limit < 1 || new_limit > kMaxLimit) {
    throw InvalidArgument(
        fmt::format("fairsem: {}: a new limit must be at least 1 and at most {}, "
                    "got {}",
                    where(), kMaxLimit, new_limit));
  }
  const std::string limit = std::to_string(new_limit);
  // With an idle expiry, a semaphore that expired (whose first limit this stores again) gets it
  // again too: its keys expire as they did.
  const long long expiry = idle_expiry_ms_.load();
  const std::string expiry_arg = std::to_string(expiry);
  Args args{limit};
  if (expiry > 0) args.push_back(expiry_arg);
  Reply reply = [&] {
    Borrowed conn(*this);
    return run(*conn, "resize", args);
  }();
  const detail::ResizeReply r = detail::decode_resize(reply);
  observed_.limit_set(r.new_limit);
  return {r.old_limit, r.new_limit, r.promoted};
}

FAIRSEM_INLINE long long SemaphoreCore::set_tenant_weight(const std::string& tenant,
                                                          long long weight) {
  validate_tenant(tenant);
  if (weight < 1) {
    throw InvalidArgument(
        fmt::format("fairsem: {}: a tenant's weight must be at least 1, got {}", where(), weight));
  }
  Reply reply = [&] {
    Borrowed conn(*this);
    return run(*conn, "tenant", {tenant, std::to_string(weight)});
  }();
  return detail::decode_tenant(reply);
}

FAIRSEM_INLINE const Script& scripts::semaphore_script(std::string_view op) {
  for (const Script* script : scripts::semaphore_scripts) {
    if (script->name.substr(std::string_view("semaphore_").size()) == op) return *script;
  }
  throw std::logic_error(fmt::format("fairsem: no semaphore script for operation '{}'", op));
}

FAIRSEM_INLINE SemaphoreOptions admin_options(std::string key_prefix) {
  SemaphoreOptions o;
  o.key_prefix = std::move(key_prefix);
  o.auto_renew = false;
  return o;
}

FAIRSEM_INLINE std::vector<std::string> semaphore_keys(std::string_view key_prefix,
                                                       std::string_view name) {
  const std::string base = fmt::format("{}:{{{}}}:", key_prefix, name);
  return {base + "owner", base + "time",      base + "counter", base + "meta", base + "info",
          base + "wake:", base + "receipts:", base + "slots",   base + "free"};
}

}  // namespace fairsem::detail
