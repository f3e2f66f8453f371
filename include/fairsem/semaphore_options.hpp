#pragma once

// The options of a FairSemaphore (SemaphoreOptions), the callbacks they carry, and what those
// callbacks are told about a permit (PermitInfo).

// Header-only mode: the first fairsem header a translation unit includes brings the whole
// implementation at its end (fairsem/impl/header_only.hpp), once the headers it includes are
// complete. See fairsem/impl/config.hpp.
#if defined(FAIRSEM_HEADER_ONLY) && !defined(FAIRSEM_IMPL_PENDING)
#define FAIRSEM_IMPL_PENDING
#define FAIRSEM_IMPL_BY_SEMAPHORE_OPTIONS_HPP
#endif

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fairsem/metrics.hpp"

namespace fairsem {

enum class LogLevel { warning, error };

/// Receives what fairsem cannot report by exception: a release that failed in a destructor, a
/// renewal of the watchdog that failed. May be called from any thread (what the watchdog's
/// renewals log, from the Client's callback thread, in order with on_lost and
/// on_renew_failure); it should not block for long. Empty (the default): nothing is logged.
/// Messages name the semaphore and the server endpoint, never a password.
using Logger = std::function<void(LogLevel level, std::string_view message)>;

/// Called once per permit when a held permit is found lost (its lease ran out or its entry
/// was removed from Redis): when the watchdog finds it, from the Client's callback thread (after
/// that permit's on_renew_failure calls; the renewals never wait for it, but the callbacks
/// after it do), or from the thread that called Permit::renew or renew_all — possibly both at
/// once for different permits, so it must be thread-safe. The permit's holder should stop
/// relying on it (see Permit::lost and the fencing token).
using LostCallback = std::function<void(const std::string& permit_id, const std::string& reason)>;

/// One entry of Status (a holder or a waiter), and the permit on_renew_failure is told about.
struct PermitInfo {
  std::string id;
  long long ticket = 0;                    // the fencing token of a holder
  std::chrono::milliseconds lease_left{};  // until the server reaps it, unless renewed
  std::string owner;                       // SemaphoreOptions::owner_info of its acquirer
  long long count = 1;                     // the units it holds or asks for
  std::vector<long long> slots;            // a holder's slots, ascending (Permit::slots)
  long long slot = -1;                     // a holder's lowest slot (Permit::slot); -1 waiting
  /// From status(), for a waiter: how long since it queued, by the server's clock (nullopt
  /// for a holder, and for a waiter whose client is of fairsem 0.3.1 or earlier).
  std::optional<std::chrono::milliseconds> waited;
  /// Whose permit or request it is (SemaphoreOptions::tenant; "": the default tenant).
  std::string tenant;
};

/// Called when renewing a held permit failed while its lease still runs: the renew call threw
/// (Redis unreachable, an error reply), or with min_replicas too few replicas acknowledged it,
/// or a watchdog's renew call has had no reply for a quarter of the renew interval (a server
/// that hangs: reported again each quarter while the call waits, until the lease runs out).
/// A warning before the loss: unless a renewal succeeds within permit.lease_left, on_lost
/// follows. `permit` has the permit's id, its fencing token (ticket), its slot, the time its
/// lease had left on this process's clock when the renewal failed (> 0) and its owner_info;
/// `error` says what failed. Called once per permit per failed renewal: from the Client's
/// callback thread for the watchdog's renewals (before that permit's on_lost), or from the
/// thread that called Permit::renew or renew_all (which then also throw, except when only
/// replicas were missing); never for a permit already lost or released when the renewal failed.
/// Must be thread-safe, like on_lost; what it throws is logged.
using RenewFailureCallback =
    std::function<void(const PermitInfo& permit, const std::string& error)>;

/// The largest limit a semaphore may have (10^9): it keeps every ticket and slot exact in the
/// server's Lua, whose numbers are doubles.
inline constexpr long long kMaxLimit = 1'000'000'000;

/// The longest SemaphoreOptions::tenant, in bytes.
inline constexpr std::size_t kMaxTenantLength = 200;

/// The longest SemaphoreOptions::idle_expiry (10 years).
inline constexpr std::chrono::milliseconds kMaxIdleExpiry = std::chrono::hours(24 * 3653);

struct SemaphoreOptions {
  /// How many permits may be held at once across every client of the semaphore (1 to
  /// kMaxLimit). The first client stores it in Redis; opening the semaphore with another limit
  /// throws LimitMismatchError.
  long long limit = 1;
  /// How long a permit (or a queued waiter) lives in Redis without being renewed; also the
  /// time after which the permit of a crashed holder passes on. At most 30 days.
  std::chrono::milliseconds lease = std::chrono::seconds(10);
  /// Keys are "<key_prefix>:{<name>}:...".
  std::string key_prefix = "fairsem";
  /// How often the watchdog renews held permits; zero means lease / 3. Must be below lease.
  /// After a failed renewal (an error, or too few replicas) it tries again a quarter of this
  /// later, until one succeeds or the lease runs out.
  std::chrono::milliseconds renew_interval = std::chrono::milliseconds(0);
  /// Renew held permits in the background (by the Client's watchdog, on the renewal thread of
  /// the node that serves the semaphore, shared by all the semaphores of that node). Off: a
  /// permit lives one lease unless Permit::renew() is called.
  bool auto_renew = true;
  /// Empty: a lost permit is reported to the logger.
  LostCallback on_lost;
  /// Empty: failed renewals are only logged (and counted in Metrics::renewal_failures).
  RenewFailureCallback on_renew_failure;
  /// Stored with each permit so status() shows who holds or waits; empty means
  /// default_owner_info().
  std::string owner_info;
  /// A caller-chosen permit id (same rules as names). Acquiring it again — from this or any
  /// process — returns the same permit (same fencing token) instead of a second one. Empty:
  /// every acquire gets a fresh random_id().
  std::string permit_id;
  Logger logger;
  /// Told of this semaphore's events (metrics.hpp); null: the Client's
  /// (ClientOptions::metrics_observer).
  std::shared_ptr<MetricsObserver> metrics_observer = nullptr;
  /// After each grant, WAIT until this many replicas have the write; if fewer acknowledge
  /// within replica_timeout, the permit is released and the acquire throws ReplicationError.
  /// Renewals WAIT too, and a renewal not acknowledged in time does not extend deadline().
  /// So an acknowledged permit, and its lease, survive a failover to an acknowledging replica
  /// (docs/deployments.md). 0 (the default): no WAIT.
  int min_replicas = 0;
  /// How long one WAIT may take, > 0 when min_replicas > 0.
  std::chrono::milliseconds replica_timeout = std::chrono::seconds(1);
  /// A bounded queue: an acquire that would wait behind this many queued requests or more (of
  /// every client, whatever their units) fails at once with QueueFullError and writes nothing.
  /// Checked by the acquire script, atomically; a request already queued is never refused, and
  /// try_acquire (which never queues) is unaffected. Each handle passes its own bound. 0 (the
  /// default): unbounded.
  long long max_waiters = 0;
  /// Keys that clean up after themselves: every key of the semaphore (its counter and stored
  /// limit too) expires once nobody has acquired, waited or renewed on it for this long (they
  /// go between 1 and 1.5 times max(idle_expiry, lease) after the last acquire or renewal;
  /// status() and the CLI's reads do not keep it). A holder or waiter keeps it however long it
  /// takes, and fencing tokens go on increasing across the expiry (docs/guarantees.md). The
  /// first client that opens the semaphore with a value above 0 stores it in Redis; a client
  /// with 0 follows what is stored, and opening with another value above 0 throws
  /// InvalidArgument. 0 (the default): the keys never expire, as in earlier versions; turn it on
  /// only once no client of 0.3.1 or earlier uses the semaphore (they do not keep its keys alive).
  /// At least the lease, at most kMaxIdleExpiry.
  std::chrono::milliseconds idle_expiry = std::chrono::milliseconds(0);
  /// Whose requests this handle makes: fair shares between tenants of one semaphore. Among the
  /// tenants with waiters, permits go by weighted fair queuing of units (each tenant's weight
  /// set with SemaphoreAdmin::set_tenant_weight, 1 by default); within a tenant, in strict FIFO
  /// order as always; a tenant alone gets the whole limit (docs/guarantees.md#tenants). Any
  /// bytes but control bytes, at most kMaxTenantLength. Empty (the default): the default tenant.
  /// The first request that names a tenant upgrades the semaphore to data model 3, which clients
  /// of fairsem 0.4 and earlier refuse (DataModelError) rather than misread.
  std::string tenant;

  /// Throws InvalidArgument naming the first bad field.
  void validate() const;
  /// renew_interval, or lease / 3 when it is zero.
  std::chrono::milliseconds effective_renew_interval() const noexcept {
    return renew_interval.count() != 0 ? renew_interval : lease / 3;
  }
};

/// Checks a semaphore name or permit id: non-empty, at most 200 bytes, no '{', '}',
/// whitespace or control bytes. Throws InvalidArgument naming `what`.
void validate_name(std::string_view value, std::string_view what);

/// Checks a tenant (SemaphoreOptions::tenant): at most kMaxTenantLength bytes, no control
/// bytes; empty is the default tenant. Throws InvalidArgument.
void validate_tenant(std::string_view tenant);

/// A fresh id of 128 random bits as 32 lowercase hex digits, from the kernel's random source (a
/// forked child never repeats its parent's ids): what a permit gets when
/// SemaphoreOptions::permit_id is empty. Use it for a permit_id that must be known before the
/// acquire returns (to evict its queue entry from another thread, say), or for a unique name.
/// Throws std::system_error if the kernel gives no random bytes.
std::string random_id();

/// "hostname:pid" of this process ("unknown-host:pid" when it has no host name): the owner_info
/// stored with a permit whose SemaphoreOptions::owner_info is empty.
std::string default_owner_info();

}  // namespace fairsem

#if defined(FAIRSEM_HEADER_ONLY) && defined(FAIRSEM_IMPL_BY_SEMAPHORE_OPTIONS_HPP)
#include "fairsem/impl/header_only.hpp"
#endif
