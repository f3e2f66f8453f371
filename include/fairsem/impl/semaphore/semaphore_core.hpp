#pragma once

// The engine behind FairSemaphore and SemaphoreAdmin, one per handle: the script calls of one
// semaphore (open, acquire, release, renew, status, evict, resize), its held permits and their
// renewal, and its counters (permit_state.hpp, metric_counters.hpp). Internal: nothing public
// includes this header. Defined in four files, one per facet:
//   - semaphore_core-inl.hpp: set-up, script calls, release and the admin calls;
//   - semaphore_core_acquire-inl.hpp: the blocking acquire, the start of an asynchronous one
//     (AsyncAcquire) and the calls an acquire's I/O (AcquireIo) makes;
//   - semaphore_core_leaves-inl.hpp: leaving the queue, at once or in the background;
//   - semaphore_core_renewal-inl.hpp: renewing held permits.
// An acquire's decisions are its state machine's (protocol/acquire_fsm.hpp). Its connections
// and the watchdog thread that renews its permits are its Client's (runtime/runtime.hpp).

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/net/router.hpp"
#include "fairsem/impl/protocol/acquire_fsm.hpp"
#include "fairsem/impl/protocol/replies.hpp"
#include "fairsem/impl/runtime/admission.hpp"
#include "fairsem/impl/runtime/runtime.hpp"
#include "fairsem/impl/semaphore/callback_gate.hpp"
#include "fairsem/impl/semaphore/in_flight.hpp"
#include "fairsem/impl/semaphore/metric_counters.hpp"
#include "fairsem/impl/semaphore/observation.hpp"
#include "fairsem/impl/semaphore/permit_state.hpp"
#include "fairsem/impl/threads/serial_runs.hpp"
#include "fairsem/semaphore.hpp"

namespace fairsem::detail {

class AsyncAcquire;

/// True for the replies that say the server did not run the script yet (loading its data,
/// busy with another script, a replica without its master, a slot in migration, a cluster
/// without a shard for a moment): retried with backoff.
bool is_transient(std::string_view server_message) noexcept;

/// The options of a SemaphoreAdmin's semaphore (and a listing's): the stored limit, nothing
/// renewed.
SemaphoreOptions admin_options(std::string key_prefix);

class SemaphoreCore : public std::enable_shared_from_this<SemaphoreCore> {
 public:
  /// `admin`: for SemaphoreAdmin, whose calls pass limit 0 ("whatever Redis stores"); the
  /// script then accepts only status and evict.
  SemaphoreCore(std::shared_ptr<Runtime> runtime, std::string name, SemaphoreOptions options,
                bool admin = false);
  ~SemaphoreCore() = default;
  SemaphoreCore(const SemaphoreCore&) = delete;
  SemaphoreCore& operator=(const SemaphoreCore&) = delete;

  void open();
  void connect();
  /// What the public calls run: try_acquire (`wait` false), or acquire until `deadline` (none:
  /// no limit), of `units` units, counted in the metrics; the acquire's state machine
  /// (acquire_fsm.hpp) driven on this thread. Throws InvalidArgument for units below 1 or above
  /// the limit.
  std::optional<Permit> measured_acquire(long long units, bool wait,
                                         std::optional<Clock::time_point> deadline);
  ReleaseResult release(PermitState& state);
  /// Gives back `units` of the permit's units (all of them: release()). Throws InvalidArgument
  /// for units below 1 or above what the permit holds.
  ReleaseResult release_units(PermitState& state, long long units);
  bool renew(PermitState& state);
  std::size_t renew_all();
  Status status();
  /// status() over `conn`, a connection to the node that stores the semaphore (a listing's).
  Status status_on(Connection& conn);
  EvictResult evict(const std::string& permit_id);
  ResizeResult resize(long long new_limit);
  /// SemaphoreAdmin::set_tenant_weight.
  long long set_tenant_weight(const std::string& tenant, long long weight);
  /// Starts an asynchronous acquire of `units` (until `deadline`, if any); see FairSemaphore.
  std::shared_ptr<AsyncAcquire> acquire_async(long long units,
                                              std::optional<Clock::time_point> deadline,
                                              AcquireCallback done);
  /// Ends every asynchronous acquire still pending with `why`.
  void cancel_requests(const std::exception_ptr& why);
  /// Ends every asynchronous acquire still pending with `why` and refuses new ones (a callback
  /// may try), then waits until their callbacks have run and no step of theirs holds a
  /// reference any more; except on fairsem's own threads and while this thread holds a pool
  /// connection, where the wait could be for itself.
  void end_requests(const std::exception_ptr& why);
  /// The handle goes away: the background leaves (leave_later) are dropped (their entries
  /// expire on their own), and a round of them under way is waited for (one leave, at most a
  /// command timeout), so that none calls the logger after the handle is gone. Not waited for
  /// where end_requests does not wait.
  void close_leaves() noexcept;

  const std::string& name() const noexcept { return name_; }
  const SemaphoreOptions& options() const noexcept { return options_; }
  Metrics metrics() const { return metrics_.snapshot(); }
  void log(LogLevel level, const std::string& message) const noexcept;
  /// "semaphore 'NAME' on ENDPOINT", for messages (built once: every script call needs it).
  const std::string& where() const noexcept { return where_; }
  /// The Client's shared part (its worker threads release permits handed to them).
  Runtime& runtime() const noexcept { return *runtime_; }
  /// In a child made by fork(), throws ForkedProcessError (fork.hpp). First in every call that
  /// takes a lock or waits: the parent's threads, which the child lacks, may have held the lock
  /// (or the admission line's turn) at the fork, and nothing in the child would let it go.
  void check_process() const { runtime_->owner().check("this Client"); }
  /// This semaphore as a user's handle holds it (a FairSemaphore, a Permit): while any such
  /// pointer lives, its callbacks run; the destructor of the last waits for those posted and
  /// lets no other run (callback_gate.hpp).
  std::shared_ptr<SemaphoreCore> user_handle();

  // For the watchdog's renewal lanes (watchdog.hpp): what they renew, on which slot's
  // connection, and the counter a reconnect of that connection counts in.
  int slot() const noexcept { return slot_; }
  std::vector<std::shared_ptr<PermitState>> held_permits();
  /// A lane's connection for calls that are worth nothing after `deadline`: made, or found,
  /// under it; null when none could be made (the lane has logged why).
  using RenewalConnect = std::function<Connection*(Clock::time_point deadline)>;
  /// One lane round: renews `permits` chunk by chunk, each call on the connection `connect`
  /// gives for the latest deadline of the chunk's permits, and bounded by it (no command, retry
  /// or reconnect outlives every lease it would extend). A permit whose deadline has passed
  /// before its call is lost without one; a chunk that fails marks those whose lease ran out
  /// meanwhile as lost. Returns false when a permit still held was not renewed (a call failed,
  /// or too few replicas acknowledged it): the watchdog then tries again before the interval.
  bool renew_round(const RenewalConnect& connect,
                   const std::vector<std::shared_ptr<PermitState>>& permits);
  const std::shared_ptr<MetricCounters::Counter>& reconnect_counter() const noexcept {
    return metrics_.reconnects;
  }

  // For the drivers of an acquire (acquire_io.hpp, async_acquire.hpp): the I/O its state machine
  // (acquire_fsm.hpp) asks for, and what frames it. They decide nothing: the machine does.

  /// A connection borrowed from the pool for one operation; returned by the destructor.
  class Borrowed {
   public:
    /// With `deadline`, waiting for the pool and connecting end there (TimeoutError).
    explicit Borrowed(SemaphoreCore& core, std::optional<Clock::time_point> deadline = std::nullopt)
        : core_(core), conn_(core.take_connection(deadline)) {}
    ~Borrowed() { core_.give_back(std::move(conn_)); }
    Borrowed(const Borrowed&) = delete;
    Borrowed& operator=(const Borrowed&) = delete;
    Connection& operator*() noexcept { return *conn_; }
    Connection* operator->() noexcept { return conn_.get(); }

   private:
    SemaphoreCore& core_;
    std::unique_ptr<Connection> conn_;
  };

  /// The machine's parameters for an acquire of `units` (`wait` false: a try) until `deadline`
  /// (none: no limit), made at `started`.
  AcquireParams acquire_params(long long units, bool wait,
                               std::optional<Clock::time_point> deadline,
                               Clock::time_point started) const;
  /// The permit id of a new acquire: random, or the caller's (SemaphoreOptions::permit_id).
  std::string next_id() const {
    return options_.permit_id.empty() ? random_id() : options_.permit_id;
  }
  /// Units below 1 or above the limit: InvalidArgument.
  void check_units(long long units) const;
  /// The acquire call in `mode` ("try" or "queue"); `ticket`: the ticket a polling waiter
  /// already has (0 on its first call); `fresh`: `id` was drawn at random for this request and
  /// never sent (the script then skips what only an id used before needs). Throws
  /// InvalidArgument when `id` is granted already with another number of units (a
  /// caller-chosen permit_id).
  AcquireReply run_acquire(Connection& conn, const std::string& id, std::string_view mode,
                           long long units, long long ticket = 0, bool fresh = false);
  /// Listens, through the Client's waker, for the wake-ups of the request `id` that `conn`
  /// queued with a call sent at `since`; `hook` and `since` as for Waker::subscribe.
  std::unique_ptr<WakeSubscription> subscribe(const std::string& id, Connection& conn,
                                              std::function<void()> hook, Clock::time_point since);
  /// WAIT for min_replicas replicas to have what this connection wrote; returns how many did.
  long long wait_replicas(Connection& conn);
  Permit make_permit(const std::string& id, const AcquireReply& reply, Clock::time_point sent);
  /// Leaves the queue: removes the entry of `id` with `ticket` (0: whatever entry it has) on
  /// `conn`, borrowed first if it is not, within one command timeout (retries and reconnects
  /// included). The error, logged, if that failed (null if not). While a leave failed a moment
  /// ago in a way that passes (the server is away), one not `background` fails at once, with no
  /// call: a request's leave then goes to the background (leave_later) without waiting for a
  /// time-out of its own, so many requests cancelled (or timed out) together wait for one.
  std::exception_ptr leave(std::optional<Borrowed>& conn, const std::string& id, long long ticket,
                           bool background = false) noexcept;
  /// Leaves the queue in the background (the server is unreachable now): on a worker thread,
  /// tried again with backoff (RetryBackoff) while the failure passes, until `until`, when the
  /// server reaps the entry before it could promote it. Never blocks; dropped if the semaphore
  /// is gone first (the entry then expires by `until` all the same).
  void leave_later(const std::string& id, long long ticket, Clock::time_point until) noexcept;
  /// Logs that the waker's BRPOP was refused with `error` (transient refusals are not).
  void wake_up_refused(const std::string& error);
  /// What an acquire of `id` for `units` that ended with `outcome` throws: EvictedError,
  /// RequestTooLargeError, or ReplicationError (with `acked` replicas). Null for the others.
  std::exception_ptr acquire_error(AcquireOutcome outcome, const std::string& id, long long units,
                                   long long acked) const;
  /// Counts an acquire of `units` made.
  void count_attempt(long long units) noexcept;
  /// Counts an acquire of `units` that ended with `outcome` (throwing `error`) after `waited`.
  void count_outcome(AcquireOutcome outcome, const std::exception_ptr& error,
                     Clock::duration waited, long long units) noexcept;
  /// The observer learns, once, that `state`'s permit ended (lost, or released or dropped).
  void end_permit(PermitState& state, bool lost) const noexcept {
    if (!state.ended.exchange(true)) {
      observed_.permit_ended(state.told_units.load(), state.granted_at, lost);
    }
  }
  /// The line this semaphore's requests send their first call in (admission.hpp).
  Admission& admission() const noexcept { return *admission_; }
  /// The asynchronous requests pending, and their steps under way.
  const std::shared_ptr<InFlight>& in_flight() const noexcept { return in_flight_; }
  /// An asynchronous request completed: no longer pending.
  void forget_request(AsyncAcquire* request);

 private:
  /// A connection of the Client's pool whose reconnects count in this semaphore's metrics.
  std::unique_ptr<Connection> take_connection(std::optional<Clock::time_point> deadline);
  void give_back(std::unique_ptr<Connection> conn) noexcept {
    runtime_->pool().give_back(std::move(conn));
  }

  /// Where an acquire's FRESH argument is among a script call's arguments (0-based: ARGV[12] of
  /// acquire.lua, after op, limit, lease and the 8 run_acquire() puts first): run() clears it
  /// when it sends a fresh acquire again. TENANT may follow it.
  static constexpr std::size_t kAcquireFreshArg = 11;

  /// Runs one operation of the semaphore script, again after a lost reply (up to `attempts` in
  /// all; 0: kScriptAttempts). Refusals become LimitMismatchError / ReplyError. `fresh`: the
  /// last of `extra` is acquire's FRESH flag, "1", sent as "0" when the call is sent again.
  Reply run(Connection& conn, std::string_view op, const Args& extra, long long units = 1,
            bool fresh = false, int attempts = 0);
  /// This request's turn to send its first call (admission.hpp): once the requests made before
  /// it have had theirs answered; nullopt when `deadline` passes first. At once on fairsem's own
  /// threads and while this thread holds a pool connection, where the wait could be for itself.
  std::optional<AdmissionTurn> wait_turn(std::optional<Clock::time_point> deadline);
  /// A leave handed to the background (leave_later).
  struct PendingLeave {
    std::string id;
    long long ticket = 0;
    Clock::time_point until;
  };
  /// On a worker thread: tries the pending leaves; those that fail in a way that passes are
  /// tried again after a backoff, until their time is up.
  void retry_leaves();
  void mark_lost(PermitState& state, const std::string& reason);
  /// Runs `call` (user code: a callback or the logger) now, or, on a renewal lane's thread, on
  /// the Client's callback thread (notifier.hpp), after the calls posted before it.
  void call_back(const std::function<void()>& call) const noexcept;
  void forget(PermitState& state);
  /// One renew call for `permits`; marks those found gone as lost. Throws what run() throws.
  /// False when too few replicas acknowledged it: the deadlines of those held stay as they were.
  bool renew_chunk(Connection& conn, const std::vector<PermitState*>& permits);
  /// Renewing `permits` failed with `error`: counted for each one still held, and reported to
  /// on_renew_failure for each whose lease has not run out yet.
  void renewal_failed(const std::vector<PermitState*>& permits, const std::string& error) noexcept;

  /// What the user handles share: its destructor closes the callbacks.
  struct UserHandles {
    explicit UserHandles(std::shared_ptr<SemaphoreCore> c) : core(std::move(c)) {}
    UserHandles(const UserHandles&) = delete;
    UserHandles& operator=(const UserHandles&) = delete;
    ~UserHandles();
    const std::shared_ptr<SemaphoreCore> core;
  };

  const std::shared_ptr<Runtime> runtime_;
  const ConnectionOptions& connection_;  // the Client's (runtime_ keeps it)
  const std::string name_;
  const SemaphoreOptions options_;
  const std::string endpoint_;
  const std::string where_;
  const std::string owner_info_;
  const std::string limit_arg_;
  const std::string lease_arg_;
  // The idle expiry its acquires and resizes pass, in ms: SemaphoreOptions::idle_expiry, or
  // with 0 the one open() found stored, so that the keys it makes again after an expiry expire
  // too. The one member written after construction (by open(), once) and read on other
  // threads (asynchronous acquires on the executor, retries): an atomic, so that no reader
  // depends on open() having run before the core was shared.
  std::atomic<long long> idle_expiry_ms_;
  const std::string receipt_arg_;  // how long a release receipt outlives the release, in ms
  const std::string min_replicas_arg_;
  const std::string replica_timeout_arg_;
  const milliseconds renew_interval_;
  const milliseconds poll_interval_;
  // A woken waiter takes its permit without another call when more than this is left of it.
  const milliseconds direct_grant_margin_;
  // How long a grant's WAIT may take (replica_timeout with min_replicas, else 0).
  const milliseconds wait_allowance_;
  std::vector<std::string> keys_;
  Args key_args_;
  // The slot its connections are routed by: a cluster's hash slot of every key of the
  // semaphore, 0 through Sentinel, -1 standalone.
  int slot_ = -1;

  std::atomic<bool> old_server_reported_{false};  // a too old server was logged once
  std::atomic<bool> watched_{false};              // the Client's watchdog renews its permits
  std::mutex mu_;                                 // guards live_
  std::mutex handles_mu_;                         // guards handles_
  std::weak_ptr<UserHandles> handles_;            // shared by the user handles
  const std::shared_ptr<CallbackGate> callbacks_ = std::make_shared<CallbackGate>();
  std::unordered_map<PermitState*, std::shared_ptr<PermitState>> live_;
  const std::shared_ptr<InFlight> in_flight_ = std::make_shared<InFlight>();
  // The line every handle of this semaphore in the Client shares (null for SemaphoreAdmin).
  std::shared_ptr<Admission> admission_;
  // Until when a leave skips its call (leave()): a command timeout after one failed in a way
  // that passes; 0 once one succeeded. Clock's ticks since its epoch.
  std::atomic<Clock::rep> leaves_away_until_{0};
  std::mutex leaves_mu_;  // guards the five below
  std::condition_variable leaves_cv_;
  std::vector<PendingLeave> leaves_;
  SerialRuns leave_runs_;        // of retry_leaves(), posted or running
  bool leaves_running_ = false;  // a retry_leaves() runs
  bool leaves_closed_ = false;   // close_leaves() ran: leaves are dropped
  RetryBackoff leave_backoff_{
      static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())};

  MetricCounters metrics_;
  Observation observed_;
};

}  // namespace fairsem::detail
