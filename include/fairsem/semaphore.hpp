#pragma once

// FairSemaphore: a fair (FIFO), lease-based counting semaphore shared through Redis by every
// process that opens the same name. Permit: one granted permit, released by its destructor.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "fairsem/client.hpp"
#include "fairsem/connection_options.hpp"
#include "fairsem/errors.hpp"
#include "fairsem/metrics.hpp"

namespace fairsem {

enum class LogLevel { warning, error };

/// Receives what fairsem cannot report by exception: a release that failed in a destructor, a
/// renewal that failed on the watchdog thread. May be called from any thread, including the
/// watchdog's; it must not block for long. Empty (the default): nothing is logged. Messages name
/// the semaphore and the server endpoint, never a password.
using Logger = std::function<void(LogLevel level, std::string_view message)>;

/// Called once per permit when a held permit is found lost (its lease ran out or its entry
/// was removed from Redis): from the watchdog thread, or from the thread that called
/// Permit::renew — possibly both at once for different permits, so it must be thread-safe.
/// The permit's holder should stop relying on it (see Permit::lost and the fencing token).
using LostCallback = std::function<void(const std::string& permit_id, const std::string& reason)>;

struct PermitInfo;

/// Called when renewing a held permit failed while its lease still runs: the renew call threw
/// (Redis unreachable, an error reply), or with min_replicas too few replicas acknowledged it.
/// A warning before the loss: unless a renewal succeeds within permit.lease_left, on_lost
/// follows. `permit` has the permit's id, its fencing token (ticket), its slot, the time its
/// lease has left on this process's clock (> 0) and its owner_info; `error` says what failed.
/// Called once per permit per failed renewal, from the watchdog thread, or from the thread that
/// called Permit::renew or renew_all (which then also throw, except when only replicas were
/// missing); never for a permit already lost or released. Must be thread-safe, like on_lost; what
/// it throws is logged.
using RenewFailureCallback =
    std::function<void(const PermitInfo& permit, const std::string& error)>;

struct SemaphoreOptions {
  /// How many permits may be held at once across every client of the semaphore (1 to 10^9).
  /// The first
  /// client stores it in Redis; opening the semaphore with another limit throws
  /// LimitMismatchError.
  long long limit = 1;
  /// How long a permit (or a queued waiter) lives in Redis without being renewed; also the
  /// time after which the permit of a crashed holder passes on. At most 30 days.
  std::chrono::milliseconds lease = std::chrono::seconds(10);
  /// Keys are "<key_prefix>:{<name>}:...".
  std::string key_prefix = "fairsem";
  /// How often the watchdog renews held permits; zero means lease / 3. Must be below lease.
  std::chrono::milliseconds renew_interval = std::chrono::milliseconds(0);
  /// Renew held permits in the background (on the Client's one watchdog thread, shared by all
  /// its semaphores). Off: a permit lives one lease unless Permit::renew() is called.
  bool auto_renew = true;
  /// Empty: a lost permit is reported to the logger.
  LostCallback on_lost;
  /// Empty: failed renewals are only logged (and counted in Metrics::renewal_failures).
  RenewFailureCallback on_renew_failure;
  /// Stored with each permit so status() shows who holds or waits; empty means "hostname:pid".
  std::string owner_info;
  /// A caller-chosen permit id (same rules as names). Acquiring it again — from this or any
  /// process — returns the same permit (same fencing token) instead of a second one. Empty:
  /// every acquire gets a fresh random id.
  std::string permit_id;
  Logger logger;
  /// After each grant, WAIT until this many replicas have the write; if fewer acknowledge
  /// within replica_timeout, the permit is released and the acquire throws ReplicationError.
  /// Renewals WAIT too, and a renewal not acknowledged in time does not extend deadline().
  /// So an acknowledged permit, and its lease, survive a failover to an acknowledging replica
  /// (README "Deployments"). 0 (the default): no WAIT.
  int min_replicas = 0;
  /// How long one WAIT may take, > 0 when min_replicas > 0.
  std::chrono::milliseconds replica_timeout = std::chrono::seconds(1);

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

/// What Permit::release found.
enum class ReleaseResult {
  released,         // the permit was live and is now free (the next waiter was woken)
  expired,          // the permit was already gone from Redis: its lease ran out or its keys
                    // were removed, so someone else may have held it meanwhile
  already_released  // this Permit had been released (or moved from) before; nothing was sent
};

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

/// One entry of Status: a holder or a waiter.
struct PermitInfo {
  std::string id;
  long long ticket = 0;                    // the fencing token of a holder
  std::chrono::milliseconds lease_left{};  // until the server reaps it, unless renewed
  std::string owner;                       // SemaphoreOptions::owner_info of its acquirer
  long long slot = -1;                     // a holder's slot (Permit::slot); -1 for a waiter
};

struct Status {
  long long limit = 0;        // the current limit; 0 from SemaphoreAdmin: none stored (never used)
  long long last_ticket = 0;  // the counter: tickets handed out so far
  std::vector<PermitInfo> holders;  // in ticket order; more than limit right after a shrink
  std::vector<PermitInfo> waiters;  // in queue order
};

namespace detail {
class SemaphoreCore;
struct PermitState;
class AsyncAcquire;
}  // namespace detail

/// A granted permit. Move-only; the destructor releases it and never throws (a failed
/// release is reported to the logger, and the permit then expires with its lease).
class Permit {
 public:
  /// An empty permit (holds nothing), as left behind by a move.
  Permit() noexcept;
  Permit(Permit&& other) noexcept;
  /// Releases the permit held before, then takes over `other`'s.
  Permit& operator=(Permit&& other) noexcept;
  Permit(const Permit&) = delete;
  Permit& operator=(const Permit&) = delete;
  ~Permit();

  /// True unless empty (moved from or released).
  bool held() const noexcept;
  explicit operator bool() const noexcept { return held(); }

  const std::string& id() const;
  /// The permit's ticket: strictly increasing in grant order across all clients. Pass it to
  /// the resource you protect so it can refuse a holder whose lease ran out (a paused
  /// process that resumes after its permit passed on carries an older token).
  long long fencing_token() const;
  /// The permit's slot: a number from 0 to limit - 1 that no other live permit of the
  /// semaphore holds (the slot of the holder whose leaving promoted it, or else the lowest free
  /// one). For one slot, fencing tokens
  /// strictly increase from holder to holder, so a resource partitioned by slot (partition k,
  /// connection k, worker k) can keep the newest token per slot and refuse older ones. -1 for
  /// an empty Permit.
  long long slot() const;
  /// When the lease runs out unless renewed, on this process's steady clock (estimated on
  /// the safe side: from when the renewing request was sent).
  std::chrono::steady_clock::time_point deadline() const;
  /// True once the permit was found gone from Redis (by the watchdog, renew or release), or
  /// once its deadline() passed without a renewal (e.g. while Redis could not be reached).
  bool lost() const noexcept;

  /// Renews the lease now. Returns false (and marks the permit lost, calling on_lost) if it
  /// is gone. Throws ConnectionError/TimeoutError if Redis cannot be reached.
  bool renew();
  /// Frees the permit and wakes the waiter it promotes. Releasing twice is harmless. Throws
  /// ConnectionError/TimeoutError when Redis cannot be reached (retried once first); the
  /// permit is then dropped locally and expires with its lease.
  ReleaseResult release();

 private:
  friend class detail::SemaphoreCore;
  Permit(std::shared_ptr<detail::SemaphoreCore> core,
         std::shared_ptr<detail::PermitState> state) noexcept;
  void release_quietly() noexcept;

  std::shared_ptr<detail::SemaphoreCore> core_;
  std::shared_ptr<detail::PermitState> state_;
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
  /// Cancels the request unless it has completed: its queue entry is removed (a permit granted
  /// to it in the last instant passes on to the next waiter), and its callback gets a
  /// CancelledError. Returns false when the request had completed (or been cancelled) already.
  /// Never blocks: the removal and the callback happen on a worker thread.
  bool cancel();

 private:
  friend class FairSemaphore;
  explicit AcquireRequest(std::shared_ptr<detail::AsyncAcquire> request) noexcept
      : request_(std::move(request)) {}
  std::shared_ptr<detail::AsyncAcquire> request_;
};

/// A fair, lease-based counting semaphore in Redis. Thread-safe: any number of threads may
/// acquire and release through one FairSemaphore, and permits may outlive it (they keep
/// what they need alive). A moved-from FairSemaphore may only be destroyed or assigned to.
///
/// Timed calls: the deadline bounds the waiting in the queue. Talking to Redis is bounded by
/// the connection's timeouts and retries, so when Redis is unreachable try_acquire_for can
/// take longer than its timeout before it throws ConnectionError.
class FairSemaphore {
 public:
  /// Validates everything (InvalidArgument), connects (ConnectionError, TimeoutError,
  /// AuthError), checks the key types (ReplyError) and the limit (LimitMismatchError), and
  /// stores the limit when this is the semaphore's first use. Nothing is written when it throws.
  /// Opened through `client`, it starts no thread and shares the Client's connections and
  /// watchdog with every other semaphore of that Client.
  FairSemaphore(const Client& client, std::string name, SemaphoreOptions options = {});
  /// As above, with a Client of its own.
  FairSemaphore(ConnectionOptions connection, std::string name, SemaphoreOptions options = {});
  FairSemaphore(FairSemaphore&&) noexcept;
  /// Cancels the asynchronous requests still pending on this handle's semaphore (as the
  /// destructor does), then takes over `other`'s.
  FairSemaphore& operator=(FairSemaphore&&) noexcept;
  FairSemaphore(const FairSemaphore&) = delete;
  FairSemaphore& operator=(const FairSemaphore&) = delete;
  /// Asynchronous requests still pending complete with CancelledError, their queue entries
  /// removed (on a worker thread; the destructor does not wait for it). Permits live on.
  ~FairSemaphore();

  /// Takes a permit if one is free and nobody waits; never waits and never queues.
  [[nodiscard]] std::optional<Permit> try_acquire();
  /// Queues and waits until granted, in ticket (FIFO) order. Throws EvictedError if the
  /// request is evicted while it waits.
  [[nodiscard]] Permit acquire();
  /// Like acquire(), giving up after `timeout`: the queue entry is removed (and if it was
  /// promoted in the last instant, the permit passes on to the next waiter).
  template <class Rep, class Period>
  [[nodiscard]] std::optional<Permit> try_acquire_for(
      const std::chrono::duration<Rep, Period>& timeout) {
    return acquire_until_steady(std::chrono::steady_clock::now() + to_steady(timeout));
  }
  /// Like try_acquire_for, until a time point of any clock (steady_clock, system_clock...).
  template <class Clock, class Duration>
  [[nodiscard]] std::optional<Permit> try_acquire_until(
      const std::chrono::time_point<Clock, Duration>& deadline) {
    const auto left = deadline - Clock::now();
    return acquire_until_steady(std::chrono::steady_clock::now() + to_steady(left));
  }

  /// acquire() without a waiting thread: queues (on one of the Client's worker threads) and
  /// completes the future with the permit, or with the exception acquire() would throw.
  [[nodiscard]] std::future<Permit> acquire_async();
  /// try_acquire_for() without a waiting thread: an empty optional when `timeout` passes.
  template <class Rep, class Period>
  [[nodiscard]] std::future<std::optional<Permit>> try_acquire_for_async(
      const std::chrono::duration<Rep, Period>& timeout) {
    return acquire_future_until(std::chrono::steady_clock::now() + to_steady(timeout));
  }
  /// What the two above are made of: `done` is called once with the outcome (see
  /// AcquireCallback); the returned AcquireRequest can cancel it. No deadline: like acquire().
  AcquireRequest acquire_async(AcquireCallback done);
  /// As above, giving up at `deadline` (done gets neither error nor permit then).
  AcquireRequest acquire_async_until(std::chrono::steady_clock::time_point deadline,
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

  const std::string& name() const noexcept;
  /// The options as given: after a resize, status().limit is the limit in force.
  const SemaphoreOptions& options() const noexcept;

 private:
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
  std::optional<Permit> acquire_until_steady(std::chrono::steady_clock::time_point deadline);
  std::future<std::optional<Permit>> acquire_future_until(
      std::chrono::steady_clock::time_point deadline);

  std::shared_ptr<detail::SemaphoreCore> core_;
};

/// Reads and administers a semaphore known only by name, without its limit (which Redis
/// stores): for tools such as `fairsem status` and `fairsem evict`. Opening one writes nothing.
/// Thread-safe.
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

  const std::string& name() const noexcept;

 private:
  std::shared_ptr<detail::SemaphoreCore> core_;
};

/// Adapts a FairSemaphore to TimedLockable, for std::unique_lock and std::scoped_lock. One
/// SemaphoreLock holds at most one permit: use one per thread (it is not itself thread-safe).
class SemaphoreLock {
 public:
  explicit SemaphoreLock(FairSemaphore& semaphore) noexcept : semaphore_(&semaphore) {}

  /// Throws std::system_error(resource_deadlock_would_occur) if this lock already holds.
  void lock() {
    check_not_held();
    permit_ = semaphore_->acquire();
  }
  bool try_lock() {
    check_not_held();
    return store(semaphore_->try_acquire());
  }
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
    check_not_held();
    return store(semaphore_->try_acquire_for(timeout));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    check_not_held();
    return store(semaphore_->try_acquire_until(deadline));
  }
  /// Releases the permit (never throws for Redis trouble; see ~Permit). Throws
  /// std::system_error(operation_not_permitted) if nothing is held.
  void unlock() {
    if (!permit_.held()) {
      throw std::system_error(std::make_error_code(std::errc::operation_not_permitted),
                              "fairsem: SemaphoreLock::unlock without a permit");
    }
    permit_ = Permit();
  }

  /// The permit held between lock and unlock (empty otherwise), e.g. for its fencing token.
  const Permit& permit() const noexcept { return permit_; }

 private:
  void check_not_held() const {
    if (permit_.held()) {
      throw std::system_error(std::make_error_code(std::errc::resource_deadlock_would_occur),
                              "fairsem: SemaphoreLock already holds a permit");
    }
  }
  bool store(std::optional<Permit> permit) {
    if (!permit) return false;
    permit_ = std::move(*permit);
    return true;
  }

  FairSemaphore* semaphore_;
  Permit permit_;
};

}  // namespace fairsem
