#pragma once

// The I/O of one acquire, as its state machine (acquire_fsm.hpp) asks for it: the acquire
// calls, the wake-up subscription, WAIT, the permit, leaving the queue. What the blocking
// acquire (SemaphoreCore::measured_acquire, on the calling thread) and AsyncAcquire (a step at
// a time on the Client's executor) share; each adds its own waiting and its own way to end.
// Defined in acquire_io-inl.hpp. Internal.

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "fairsem/impl/protocol/acquire_fsm.hpp"
#include "fairsem/impl/runtime/admission.hpp"
#include "fairsem/impl/semaphore/semaphore_core.hpp"

namespace fairsem::detail {

class AcquireIo {
 public:
  using Clock = std::chrono::steady_clock;

  /// For an acquire of `units` on `core`, which must outlive it; draws the permit id.
  AcquireIo(SemaphoreCore& core, long long units);
  ~AcquireIo();
  AcquireIo(const AcquireIo&) = delete;
  AcquireIo& operator=(const AcquireIo&) = delete;

  /// Called (on the waker's thread) whenever something comes for the subscription, for a
  /// driver that does not wait on it. Set before the first action.
  void set_hook(std::function<void()> hook) { hook_ = std::move(hook); }
  /// The admission turn the first call goes with; handed on once that call is answered.
  void set_turn(AdmissionTurn turn) { turn_ = std::move(turn); }

  /// Does `action` (send_try, send_queue, poll, subscribe, rearm, await_replicas, grant, leave
  /// or report) and returns what came of it: its result, or `failed` (the error kept).
  AcquireEvent perform(const AcquireAction& action);
  /// Waits, without a connection, for what comes for the subscription until `until`.
  AcquireEvent wait(Clock::time_point until);
  /// What came for the subscription already, if anything did.
  std::optional<AcquireEvent> take();
  /// Hands the connection back to the pool and the admission turn on, if either is held:
  /// before a wait, and before the caller hears the outcome (and may use the semaphore).
  void let_go() noexcept;
  /// From any thread: the acquire call under way (send_try, send_queue or poll) ends when the
  /// wait it is in (a reply, a connect) does, with no retry or reconnect after it, and so do
  /// the calls that follow; a leave is not cut short. For a cancelled asynchronous request,
  /// whose call would otherwise use up its retries against a hung server while its semaphore's
  /// destructor waits for it.
  void interrupt() noexcept { interrupted_.store(true, std::memory_order_release); }
  /// Keeps `error` as the one an outcome `failed` ends with (the driver's own failures).
  void keep_error(std::exception_ptr error) { error_ = std::move(error); }

  /// The permit a grant action made (once).
  std::optional<Permit> take_permit() { return std::exchange(permit_, std::nullopt); }
  /// What an outcome throws: the error kept for `failed`, the semaphore's for evicted,
  /// too_large and replication; null for the others (cancelled is the driver's).
  std::exception_ptr error(AcquireOutcome outcome) const;

 private:
  /// An acquire call: send_try, send_queue or poll.
  AcquireEvent call(const AcquireAction& action);
  /// The action after a call: on the connection that call ran on.
  Connection& conn();
  /// A wake-up, a cut-off or refused BRPOP, or nothing, as an event.
  std::optional<AcquireEvent> event_of(WakeWait waited);

  SemaphoreCore& core_;
  const long long units_;
  const std::string id_;
  std::function<void()> hook_;
  // Declared first, destroyed last: a permit not taken is released with this object, once the
  // connection is back in the pool.
  std::optional<Permit> permit_;
  std::exception_ptr error_;
  long long acked_ = 0;  // replicas that acknowledged the grant
  std::optional<AdmissionTurn> turn_;
  std::optional<SemaphoreCore::Borrowed> conn_;
  std::unique_ptr<WakeSubscription> wake_up_;
  Clock::time_point sent_;  // when the last call was sent (subscribe and rearm act on its reply)
  std::atomic<bool> interrupted_{false};  // interrupt()
};

}  // namespace fairsem::detail
