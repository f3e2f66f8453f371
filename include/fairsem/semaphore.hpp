#pragma once

// FairSemaphore: a fair (strict FIFO), lease-based counting semaphore shared through Redis by
// every process that opens the same name, and SemaphoreAdmin, its operator's view.

// Header-only mode: the first fairsem header a translation unit includes brings the whole
// implementation at its end (fairsem/impl/header_only.hpp), once the headers it includes are
// complete. See fairsem/impl/config.hpp.
#if defined(FAIRSEM_HEADER_ONLY) && !defined(FAIRSEM_IMPL_PENDING)
#define FAIRSEM_IMPL_PENDING
#define FAIRSEM_IMPL_BY_SEMAPHORE_HPP
#endif

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fairsem/client.hpp"
#include "fairsem/connection_options.hpp"
#include "fairsem/errors.hpp"
#include "fairsem/metrics.hpp"
#include "fairsem/permit.hpp"
#include "fairsem/semaphore_options.hpp"

namespace fairsem {

/// What an eviction found.
enum class EvictResult {
  holder,  // a holder was removed: its permit passed on; its owner learns of it at its next
           // renewal (on_lost, lost(), release() reports expired)
  waiter,  // a waiter was removed: its acquire throws EvictedError
  already_evicted,  // evicted before (e.g. by this call, run again after a lost reply), and
                    // its owner has not noticed yet
  not_found         // no such permit (never there, released, or expired)
};

/// What a resize did.
struct ResizeResult {
  long long old_limit = 0;  // 0: no limit was stored (the semaphore was never used)
  long long new_limit = 0;
  long long promoted = 0;  // waiters granted a permit at once (growing)
};

/// One tenant of a semaphore (SemaphoreOptions::tenant) as Status shows it.
struct TenantStatus {
  std::string name;       // "": the default tenant
  long long weight = 1;   // SemaphoreAdmin::set_tenant_weight; 1 unless set
  long long held = 0;     // units its holders hold
  long long holders = 0;  // its permits
  long long waiting = 0;  // units its waiters ask for
  long long waiters = 0;  // its queued requests
  /// How long its longest-waiting request has waited (nullopt: none waits, or no waiter's
  /// client said when it queued).
  std::optional<std::chrono::milliseconds> oldest_wait;
};

struct Status {
  long long limit = 0;        // the current limit; 0 from SemaphoreAdmin: none stored (never used)
  long long last_ticket = 0;  // the counter: the newest ticket (fencing token) drawn
  /// In ticket order (fencing tokens); more than limit right after a shrink.
  std::vector<PermitInfo> holders;
  /// In ticket order: the order of the queue, and of each tenant's (among tenants, grants go by
  /// weighted fair queuing).
  std::vector<PermitInfo> waiters;
  /// Every tenant with a holder, a waiter or a stored weight, by name (the default tenant is
  /// "": the only one of a semaphore that never named one).
  std::vector<TenantStatus> tenants;
};

/// How an asynchronous acquire ended: `error` null and `permit` set when granted; both empty
/// when a timed request gave up at its deadline; `error` set (EvictedError, CancelledError,
/// ConnectionError...: what the blocking call would throw) and `permit` empty otherwise. Called
/// once, on one of the Client's worker threads (ClientOptions::worker_threads), never on the
/// caller's; it must not block, since other requests' calls wait for that thread meanwhile.
using AcquireCallback = std::function<void(std::exception_ptr error, std::optional<Permit> permit)>;

/// A pending asynchronous acquire (FairSemaphore::acquire_async with a callback). Movable;
/// dropping it neither cancels nor waits for the request.
class AcquireRequest {
 public:
  AcquireRequest() noexcept = default;
  /// Cancels the request unless it has completed: its callback gets a CancelledError, and then
  /// its queue entry is removed (a permit granted to it in the last instant passes on to the
  /// next waiter). Returns false when the request had completed (or been cancelled) already;
  /// true means the callback gets a CancelledError, once, whatever came at the same instant (a
  /// grant, a timeout, an eviction, an error).
  /// Never blocks: the callback and the removal happen on a worker thread, the callback first,
  /// so that it does not wait for Redis; the FairSemaphore's destructor waits for the removal.
  bool cancel();

 private:
  friend class FairSemaphore;
  explicit AcquireRequest(const std::shared_ptr<detail::AsyncAcquire>& request) noexcept
      : request_(request) {}
  std::weak_ptr<detail::AsyncAcquire> request_;  // the semaphore owns it until it completes
};

/// A fair, lease-based counting semaphore in Redis. Thread-safe: any number of threads may
/// acquire and release through one FairSemaphore, and permits may outlive it (they keep
/// what they need alive). A moved-from FairSemaphore may be destroyed or assigned to; name()
/// returns an empty string, and every other call throws UsedAfterMoveError. A SemaphoreLock made
/// from it follows the semaphore to the handle it moved to.
///
/// Units: every acquire takes `units` of the limit at once (1 unless given), all granted
/// together, in strict FIFO order by ticket for every size: a request is granted when its units
/// are free and every request queued before it was granted. A small request never overtakes
/// a large one queued earlier, even where it would fit: the large one cannot starve, at the
/// price of head-of-line blocking (the units left free while the head waits for more stay
/// unused). Units below 1 or above the limit throw InvalidArgument.
///
/// Timed calls: the deadline bounds the waiting in the queue, for a free connection of the
/// pool and for connecting; a call already sent waits for its reply up to the command timeout.
/// A first call that cannot reach the server throws ConnectionError, timed or not.
///
/// Outages: a queued request rides out a server that is away (restarting, loading, failing
/// over, a broken connection): it keeps its place and polls again with backoff until its
/// deadline (none: until the server is back), then times out as usual. Errors that do not pass
/// with time, and a first call that cannot reach the server, still throw at once
/// (docs/api.md, docs/guarantees.md).
class FairSemaphore {
 public:
  /// Validates everything (InvalidArgument), connects (ConnectionError, TimeoutError,
  /// AuthError), checks the key types (ReplyError) and the limit (LimitMismatchError), and
  /// stores the limit when this is the semaphore's first use. Nothing is written when it throws.
  /// Opened through `client`, it starts no thread and shares the Client's connections and
  /// watchdog (a renewal thread per node) with every other semaphore of that Client.
  FairSemaphore(const Client& client, std::string name, SemaphoreOptions options = {});
  /// As above, with a Client of its own.
  FairSemaphore(ConnectionOptions connection, std::string name, SemaphoreOptions options = {});
  FairSemaphore(FairSemaphore&&) noexcept;
  /// Cancels the asynchronous requests still pending on this handle's semaphore and waits for
  /// their callbacks (as the destructor does), then takes over `other`'s.
  FairSemaphore& operator=(FairSemaphore&&) noexcept;
  FairSemaphore(const FairSemaphore&) = delete;
  FairSemaphore& operator=(const FairSemaphore&) = delete;
  /// Asynchronous requests still pending complete with CancelledError, their queue entries
  /// removed (on a worker thread), new ones are refused, and the destructor returns once every
  /// callback of this handle has run (the calls under way first: up to the command timeout if
  /// Redis is unreachable), so none runs afterwards. It does not wait where the wait could be
  /// for itself: in a callback, on fairsem's threads (on_lost), or while this thread holds a
  /// pool connection. Permits live on. The last of the semaphore's handles (this, or the last
  /// of its Permits that outlive it) also waits for the renewal callbacks posted for it
  /// (on_lost, on_renew_failure, the logger on the callback thread), and none is called after
  /// it returns: do not destroy it while holding what such a callback waits for.
  ~FairSemaphore();

  /// Takes a permit of `units` if they are free and nobody waits; never waits and never queues.
  [[nodiscard]] std::optional<Permit> try_acquire(long long units = 1);
  /// Queues and waits until granted, in ticket (FIFO) order. Throws EvictedError if the
  /// request is evicted while it waits, RequestTooLargeError if a resize left the limit below
  /// `units`.
  [[nodiscard]] Permit acquire(long long units = 1);
  /// Like acquire(), giving up after `timeout`: the queue entry is removed (and if it was
  /// promoted in the last instant, the permit passes on to the next waiter).
  template <class Rep, class Period>
  [[nodiscard]] std::optional<Permit> try_acquire_for(
      const std::chrono::duration<Rep, Period>& timeout) {
    return try_acquire_for(1, timeout);
  }
  template <class Rep, class Period>
  [[nodiscard]] std::optional<Permit> try_acquire_for(
      long long units, const std::chrono::duration<Rep, Period>& timeout) {
    return acquire_until_steady(units, std::chrono::steady_clock::now() + to_steady(timeout));
  }
  /// Like try_acquire_for, until a time point of any clock (steady_clock, system_clock...).
  template <class Clock, class Duration>
  [[nodiscard]] std::optional<Permit> try_acquire_until(
      const std::chrono::time_point<Clock, Duration>& deadline) {
    return try_acquire_until(1, deadline);
  }
  template <class Clock, class Duration>
  [[nodiscard]] std::optional<Permit> try_acquire_until(
      long long units, const std::chrono::time_point<Clock, Duration>& deadline) {
    const auto left = deadline - Clock::now();
    return acquire_until_steady(units, std::chrono::steady_clock::now() + to_steady(left));
  }

  /// acquire() without a waiting thread: queues (on one of the Client's worker threads) and
  /// completes the future with the permit, or with the exception acquire() would throw. Its
  /// place in the queue is its place in call order: a request of this semaphore made through
  /// the same Client after this call returned is queued behind it (docs/api.md).
  [[nodiscard]] std::future<Permit> acquire_async(long long units = 1);
  /// try_acquire_for() without a waiting thread: an empty optional when `timeout` passes.
  template <class Rep, class Period>
  [[nodiscard]] std::future<std::optional<Permit>> try_acquire_for_async(
      const std::chrono::duration<Rep, Period>& timeout) {
    return try_acquire_for_async(1, timeout);
  }
  template <class Rep, class Period>
  [[nodiscard]] std::future<std::optional<Permit>> try_acquire_for_async(
      long long units, const std::chrono::duration<Rep, Period>& timeout) {
    return acquire_future_until(units, std::chrono::steady_clock::now() + to_steady(timeout));
  }
  /// What the two above are made of: `done` is called once with the outcome (see
  /// AcquireCallback); the returned AcquireRequest can cancel it. No deadline: like acquire().
  AcquireRequest acquire_async(AcquireCallback done) { return acquire_async(1, std::move(done)); }
  AcquireRequest acquire_async(long long units, AcquireCallback done);
  /// As above, giving up at `deadline` (done gets neither error nor permit then).
  AcquireRequest acquire_async_until(std::chrono::steady_clock::time_point deadline,
                                     AcquireCallback done) {
    return acquire_async_until(1, deadline, std::move(done));
  }
  AcquireRequest acquire_async_until(long long units,
                                     std::chrono::steady_clock::time_point deadline,
                                     AcquireCallback done);

  /// Renews every permit this semaphore handle holds now, as one watchdog round does: one
  /// script call per 100 permits. For auto_renew = false, or before a long step. Permits
  /// found gone are marked lost (on_lost is called). Returns how many are still held. Throws
  /// what a script call throws (ConnectionError...); chunks after a failed one are not renewed.
  std::size_t renew_all();

  /// Holders and waiters as Redis has them now (after reaping expired entries).
  Status status();
  /// Removes permit `permit_id`, holder or waiter, from any client (an operator's tool: the
  /// permit is taken away, not released by its owner). A removed holder's permit passes on at
  /// once. Throws InvalidArgument for a malformed id.
  EvictResult evict(const std::string& permit_id);
  /// Stores a new limit (1 to 10^9) for every client of the semaphore. Growing grants the
  /// waiters it lets in at once (and wakes them). Shrinking takes no permit away: holders
  /// beyond the new limit keep theirs until they release (or their leases run out), and no
  /// permit is granted until fewer than `new_limit` hold. Clients that are open keep working
  /// and follow the new limit; one opened later with the old limit gets LimitMismatchError.
  /// options().limit keeps the value this handle was opened with. Throws InvalidArgument.
  ResizeResult resize(long long new_limit);

  /// A snapshot of this handle's counters and wait-time histogram (see Metrics). Thread-safe and
  /// cheap: no call to Redis, no lock.
  Metrics metrics() const;

  /// The semaphore's name; empty for a moved-from handle.
  const std::string& name() const noexcept;
  /// The options as given: after a resize, status().limit is the limit in force.
  const SemaphoreOptions& options() const;

 private:
  friend class SemaphoreLock;
  template <class Rep, class Period>
  static std::chrono::steady_clock::duration to_steady(std::chrono::duration<Rep, Period> d) {
    using std::chrono::duration_cast;
    using Steady = std::chrono::steady_clock::duration;
    if (d <= std::chrono::duration<Rep, Period>::zero()) return Steady::zero();
    // Saturate instead of overflowing for "forever"-like durations.
    constexpr auto kMax = std::chrono::hours(24 * 365 * 100);
    if (std::chrono::duration<double>(d) > std::chrono::duration<double>(kMax)) {
      return duration_cast<Steady>(kMax);
    }
    return duration_cast<Steady>(d);
  }
  std::optional<Permit> acquire_until_steady(long long units,
                                             std::chrono::steady_clock::time_point deadline);
  std::future<std::optional<Permit>> acquire_future_until(
      long long units, std::chrono::steady_clock::time_point deadline);
  /// The semaphore this handle holds; UsedAfterMoveError when moved from.
  const std::shared_ptr<detail::SemaphoreCore>& core() const;
  /// What every acquire of a handle (and a SemaphoreLock) makes: try_acquire (`wait` false), or
  /// acquire until `deadline` (none: no limit).
  static std::optional<Permit> acquire_on(
      detail::SemaphoreCore& core, long long units, bool wait,
      std::optional<std::chrono::steady_clock::time_point> deadline);

  std::shared_ptr<detail::SemaphoreCore> core_;
};

/// One semaphore found by SemaphoreAdmin::list().
struct SemaphoreListing {
  std::string name;
  /// "host:port" of the master that stores it.
  std::string node;
  /// As SemaphoreAdmin::status() reads it (limit > 0: a listed semaphore has one stored).
  Status status;
  /// How long nobody has used it: zero while anyone holds or waits; otherwise the time since a
  /// client last called it, to the second. Known where the server can tell without the listing
  /// itself counting as a use (CLIENT NO-TOUCH: Redis 7.2 and later, Valkey) and keeps access
  /// times (not under an LFU maxmemory-policy); nullopt elsewhere.
  std::optional<std::chrono::seconds> idle;
};

/// A fairsem function library loaded on a node (SemaphoreAdmin::function_libraries()). Each
/// fairsem version loads its own, named after its content, on each node it uses (Redis 7 and
/// later, Valkey), and never removes another version's.
struct FunctionLibrary {
  /// "host:port" of the master it is loaded on.
  std::string node;
  /// "fairsem_" and 12 hexadecimal digits of its content's SHA1.
  std::string name;
  /// The fairsem version that loads it (fairsem::version() of that client); empty for a library
  /// loaded by a release that did not record it (0.3.1 and earlier).
  std::string version;
  /// How many functions it defines.
  std::size_t functions = 0;
  /// This version's library, which prune_function_libraries() keeps.
  bool current = false;
};

/// Reads and administers a semaphore known only by name, without its limit (which Redis
/// stores): for tools such as `fairsem status` and `fairsem evict`. Opening one writes nothing.
/// Thread-safe. A moved-from SemaphoreAdmin may be destroyed or assigned to; name() returns an
/// empty string, and every other call throws UsedAfterMoveError.
class SemaphoreAdmin {
 public:
  /// Validates the arguments (InvalidArgument) and connects (ConnectionError, AuthError).
  SemaphoreAdmin(const Client& client, std::string name, std::string key_prefix = "fairsem");
  /// As above, with a Client of its own.
  SemaphoreAdmin(ConnectionOptions connection, std::string name,
                 std::string key_prefix = "fairsem");
  SemaphoreAdmin(SemaphoreAdmin&&) noexcept;
  SemaphoreAdmin& operator=(SemaphoreAdmin&&) noexcept;
  SemaphoreAdmin(const SemaphoreAdmin&) = delete;
  SemaphoreAdmin& operator=(const SemaphoreAdmin&) = delete;
  ~SemaphoreAdmin();

  /// As FairSemaphore::status(), with the stored limit (0 and every entry listed as a waiter
  /// when no limit is stored: the semaphore was never used, or its meta key was removed).
  Status status();
  /// As FairSemaphore::evict().
  EvictResult evict(const std::string& permit_id);
  /// As FairSemaphore::resize(); on a semaphore never used, stores its first limit.
  ResizeResult resize(long long new_limit);
  /// Stores `tenant`'s weight with the semaphore, for every client: among tenants with
  /// waiters, each gets units in proportion to its weight (SemaphoreOptions::tenant,
  /// docs/guarantees.md#tenants). At least 1; 1, the default, removes a stored weight. Later
  /// grants follow it; what was granted stays. Upgrades the semaphore to data model 3 (clients
  /// of fairsem 0.4 and earlier refuse it). Returns the weight it had. A weight below 1 or a bad
  /// tenant is InvalidArgument, and nothing is sent. Weights are kept with the semaphore's keys
  /// (with idle_expiry, they expire with them).
  long long set_tenant_weight(const std::string& tenant, long long weight);

  /// The semaphore's name; empty for a moved-from handle.
  const std::string& name() const noexcept;

  /// Every semaphore stored under `key_prefix` whose name matches `match` (a Redis glob: `*`,
  /// `?`, `[...]`, `\\` escapes; no braces, whitespace or control bytes), on every master of
  /// the Client's deployment (each master of a Cluster; the master of a Sentinel deployment),
  /// sorted by name. Found by SCAN (the prefix matches itself only), then each read as status()
  /// reads it, one call per semaphore. Not a snapshot: a semaphore made or gone while it runs
  /// may be missing or listed. With `time_limit`, the whole listing stops there (every call is
  /// cut short at it) with a TimeoutError. Throws InvalidArgument for a bad prefix, match or
  /// time limit (before anything is sent), ConnectionError or AuthError when a master cannot
  /// be read.
  static std::vector<SemaphoreListing> list(
      const Client& client, const std::string& key_prefix = "fairsem",
      const std::string& match = "*",
      std::optional<std::chrono::milliseconds> time_limit = std::nullopt);

  /// The fairsem function libraries loaded on every master of the Client's deployment (as
  /// list() walks them), sorted by node, then current first, then name. Libraries of other
  /// names are not listed. Empty for a server without functions (Redis 6.2). Throws
  /// ConnectionError or AuthError when a master cannot be read.
  static std::vector<FunctionLibrary> function_libraries(const Client& client);
  /// Deletes (FUNCTION DELETE) every fairsem function library but this version's from every
  /// master, and returns those it deleted; with `dry_run`, deletes nothing and returns those it
  /// would. Safe while clients of other versions run: a client that finds its library gone
  /// loads it again on its next call (one round trip more). Libraries of other names are never
  /// touched. Throws as function_libraries(), and ReplyError when the server refuses the
  /// deletion (an ACL without FUNCTION DELETE); what was deleted before stays deleted.
  static std::vector<FunctionLibrary> prune_function_libraries(const Client& client,
                                                               bool dry_run = false);

 private:
  /// The semaphore this handle holds; UsedAfterMoveError when moved from.
  const std::shared_ptr<detail::SemaphoreCore>& core() const;

  std::shared_ptr<detail::SemaphoreCore> core_;
};

}  // namespace fairsem

#if defined(FAIRSEM_HEADER_ONLY) && defined(FAIRSEM_IMPL_BY_SEMAPHORE_HPP)
#include "fairsem/impl/header_only.hpp"
#endif
