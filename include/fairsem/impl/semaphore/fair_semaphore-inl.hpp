#pragma once

// The public face of the semaphore: option and name checks, random ids and the default owner
// info, FairSemaphore and SemaphoreAdmin, each a handle on a SemaphoreCore (semaphore_core.hpp).
// Permit is in permit-inl.hpp.

#include "fairsem/impl/config.hpp"
#include "fairsem/semaphore.hpp"

#include <fmt/format.h>
#include <sys/random.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <system_error>
#include <utility>

#include "fairsem/impl/scope_exit.hpp"
#include "fairsem/impl/semaphore/async_acquire.hpp"
#include "fairsem/impl/semaphore/semaphore_core.hpp"
#include "fairsem/impl/text.hpp"

namespace fairsem {

namespace semaphore_helpers {

constexpr std::size_t kMaxNameBytes = 200;
constexpr std::size_t kMaxOwnerInfoBytes = 1024;

}  // namespace semaphore_helpers

FAIRSEM_INLINE void validate_name(std::string_view value, std::string_view what) {
  if (value.empty()) throw InvalidArgument(fmt::format("fairsem: {} must not be empty", what));
  if (value.size() > semaphore_helpers::kMaxNameBytes) {
    throw InvalidArgument(fmt::format("fairsem: {} is {} bytes long; at most {} are allowed", what,
                                      value.size(), semaphore_helpers::kMaxNameBytes));
  }
  for (std::size_t i = 0; i < value.size(); ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    const bool brace = c == '{' || c == '}';
    if (brace || detail::has_space_or_control(value.substr(i, 1))) {
      throw InvalidArgument(fmt::format(
          "fairsem: {} \"{}\" contains {} at byte {}; names may not contain '{{', '}}', "
          "whitespace or control bytes",
          what, printable(value),
          brace ? fmt::format("'{}'", value[i]) : printable(value.substr(i, 1)), i));
    }
  }
}

FAIRSEM_INLINE std::string default_owner_info() {
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  std::string name = host[0] != '\0' ? std::string(host.data()) : std::string("unknown-host");
  return fmt::format("{}:{}", name, static_cast<long>(getpid()));
}

// From the kernel, not a seeded generator: a forked child never repeats its parent's ids (a
// generator copied by fork() would).
FAIRSEM_INLINE std::string random_id() {
  std::array<std::uint64_t, 2> bits{};
  std::size_t got = 0;
  auto* bytes = reinterpret_cast<unsigned char*>(bits.data());
  while (got < sizeof(bits)) {
    const ssize_t n = getrandom(bytes + got, sizeof(bits) - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (errno != EINTR) {
      throw std::system_error(errno, std::generic_category(), "fairsem: getrandom");
    }
  }
  return fmt::format("{:016x}{:016x}", bits[0], bits[1]);
}

FAIRSEM_INLINE void SemaphoreOptions::validate() const {
  if (limit < 1 || limit > kMaxLimit) {
    throw InvalidArgument(
        fmt::format("fairsem: limit must be at least 1 and at most {}, got {}", kMaxLimit, limit));
  }
  if (lease.count() <= 0) {
    throw InvalidArgument(fmt::format("fairsem: lease must be positive, got {} ms", lease.count()));
  }
  if (lease > detail::kMaxLease) {
    throw InvalidArgument(fmt::format("fairsem: lease must be at most {} ms (30 days), got {} ms",
                                      std::chrono::milliseconds(detail::kMaxLease).count(),
                                      lease.count()));
  }
  if (renew_interval.count() < 0) {
    throw InvalidArgument(fmt::format("fairsem: renew_interval must not be negative, got {} ms",
                                      renew_interval.count()));
  }
  const std::chrono::milliseconds renew = effective_renew_interval();
  if (renew.count() == 0) {
    throw InvalidArgument(fmt::format(
        "fairsem: a lease of {} ms is too short to renew (the renew interval, lease / 3, "
        "would be 0 ms)",
        lease.count()));
  }
  if (renew >= lease) {
    throw InvalidArgument(
        fmt::format("fairsem: renew_interval ({} ms) must be shorter than the lease ({} ms)",
                    renew.count(), lease.count()));
  }
  if (min_replicas < 0) {
    throw InvalidArgument(
        fmt::format("fairsem: min_replicas must not be negative, got {}", min_replicas));
  }
  if (min_replicas > 0 && replica_timeout.count() <= 0) {
    throw InvalidArgument(fmt::format("fairsem: replica_timeout must be positive, got {} ms",
                                      replica_timeout.count()));
  }
  // A granted permit is not renewed while its WAIT runs, and waits up to one renew interval
  // for the watchdog's first round after it: both must fit in the lease with room to spare.
  if (min_replicas > 0 && replica_timeout > (lease - renew) / 2) {
    throw InvalidArgument(fmt::format(
        "fairsem: replica_timeout ({} ms) must be at most half of lease - renew_interval ({} ms "
        "here), so that a permit outlives the WAIT that confirms it",
        replica_timeout.count(), ((lease - renew) / 2).count()));
  }
  if (max_waiters < 0) {
    throw InvalidArgument(
        fmt::format("fairsem: max_waiters must not be negative, got {}", max_waiters));
  }
  if (idle_expiry.count() != 0 && (idle_expiry < lease || idle_expiry > kMaxIdleExpiry)) {
    throw InvalidArgument(fmt::format(
        "fairsem: idle_expiry must be 0 (keys never expire) or from the lease ({} ms) to {} ms, "
        "got {} ms",
        lease.count(), kMaxIdleExpiry.count(), idle_expiry.count()));
  }
  validate_name(key_prefix, "key_prefix");
  if (!permit_id.empty()) validate_name(permit_id, "permit_id");
  if (owner_info.size() > semaphore_helpers::kMaxOwnerInfoBytes) {
    throw InvalidArgument(
        fmt::format("fairsem: owner_info is {} bytes long; at most {} are allowed",
                    owner_info.size(), semaphore_helpers::kMaxOwnerInfoBytes));
  }
}

// --- FairSemaphore --------------------------------------------------------------------------

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

// --- SemaphoreAdmin -------------------------------------------------------------------------

FAIRSEM_INLINE SemaphoreAdmin::SemaphoreAdmin(const Client& client, std::string name,
                                              std::string key_prefix)
    : core_(std::make_shared<detail::SemaphoreCore>(client.runtime(), std::move(name),
                                                    detail::admin_options(std::move(key_prefix)),
                                                    /*admin=*/true)) {
  core_->connect();
}

FAIRSEM_INLINE SemaphoreAdmin::SemaphoreAdmin(ConnectionOptions connection, std::string name,
                                              std::string key_prefix)
    : SemaphoreAdmin(Client(std::move(connection)), std::move(name), std::move(key_prefix)) {}

FAIRSEM_INLINE SemaphoreAdmin::SemaphoreAdmin(SemaphoreAdmin&&) noexcept = default;
FAIRSEM_INLINE SemaphoreAdmin& SemaphoreAdmin::operator=(SemaphoreAdmin&& other) noexcept {
  if (this != &other) {
    semaphore_helpers::abandoned_in_child(core_);
    core_ = std::move(other.core_);
  }
  return *this;
}
FAIRSEM_INLINE SemaphoreAdmin::~SemaphoreAdmin() { semaphore_helpers::abandoned_in_child(core_); }

FAIRSEM_INLINE const std::shared_ptr<detail::SemaphoreCore>& SemaphoreAdmin::core() const {
  return semaphore_helpers::live(core_, "SemaphoreAdmin");
}

FAIRSEM_INLINE Status SemaphoreAdmin::status() { return core()->status(); }

FAIRSEM_INLINE EvictResult SemaphoreAdmin::evict(const std::string& permit_id) {
  return core()->evict(permit_id);
}

FAIRSEM_INLINE ResizeResult SemaphoreAdmin::resize(long long new_limit) {
  return core()->resize(new_limit);
}

FAIRSEM_INLINE const std::string& SemaphoreAdmin::name() const noexcept {
  return semaphore_helpers::name_of(core_);
}

}  // namespace fairsem
