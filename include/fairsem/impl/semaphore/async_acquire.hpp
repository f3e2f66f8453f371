#pragma once

// One asynchronous acquire: the acquire's state machine (acquire_fsm.hpp) driven on the Client's
// worker threads, a step at a time, moved on by its admission turn, its wake-up, its timer and
// cancel(). The I/O it asks for is AcquireIo's, as for the blocking acquire; what is this
// driver's own is threading: one step at a time, the turn, the timer, the callback once.
// Internal.

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "fairsem/impl/protocol/acquire_fsm.hpp"
#include "fairsem/impl/runtime/admission.hpp"
#include "fairsem/impl/semaphore/acquire_io.hpp"
#include "fairsem/impl/threads/serial_runs.hpp"
#include "fairsem/semaphore.hpp"

namespace fairsem::detail {

class SemaphoreCore;

class AsyncAcquire : public std::enable_shared_from_this<AsyncAcquire> {
 public:
  using Clock = std::chrono::steady_clock;

  AsyncAcquire(std::shared_ptr<SemaphoreCore> core, long long units,
               std::optional<Clock::time_point> deadline, AcquireCallback done);
  ~AsyncAcquire();
  AsyncAcquire(const AsyncAcquire&) = delete;
  AsyncAcquire& operator=(const AsyncAcquire&) = delete;

  /// Lines the request up behind the ones made before it (admission.hpp); its first step
  /// queues it in Redis, on a worker thread, when its turn comes. Throws std::system_error if
  /// no worker thread can start.
  void start();
  /// Ends the request with `why` unless it ended already; false then.
  bool cancel(std::exception_ptr why);

 private:
  /// Its turn has come (on a worker thread): the first step runs now, unless it ended already.
  void admitted(AdmissionTurn turn);
  /// The turn, if it has come and was not taken yet.
  std::optional<AdmissionTurn> take_turn();
  /// Runs step() on a worker thread.
  void post();
  /// What a worker thread runs for a step: it holds this request weakly (a finished one is let
  /// go of), and counts in the semaphore's InFlight until it has let go of it.
  std::function<void()> task();
  /// One step; a step asked for while one runs is run right after it, on the same thread.
  void step();
  /// What came since the last step (a cancel, the turn, what the subscription got, or only
  /// time), told to the machine; then its actions, until it waits or is over.
  void advance();
  AcquireEvent what_came();
  /// Does what the machine asks for, from `action` on, until it waits or is over.
  void run(AcquireAction action);
  /// True once, when cancel() came and the machine was not told yet.
  bool hear_cancel();
  /// A timer at `when`, unless one comes sooner; the error if none could be armed.
  std::exception_ptr arm_timer(Clock::time_point when) noexcept;
  /// Completes the request (once) with `outcome`: the callback runs on this thread. A request
  /// cancelled meanwhile completes with its cancellation instead, unless it ended in an error.
  void finish(AcquireOutcome outcome);

  const std::shared_ptr<SemaphoreCore> core_;
  const long long units_;
  const Clock::time_point started_ = Clock::now();
  AcquireCallback done_;

  std::mutex mu_;  // guards the four below
  SerialRuns steps_;
  bool finished_ = false;
  std::exception_ptr cancelled_;
  std::optional<AdmissionTurn> turn_;  // given by admitted(), taken by the next step

  // Touched only by the step that runs (and by start(), before any can); but cancel() calls
  // io_.interrupt(), which is safe from any thread.
  AcquireFsm fsm_;
  AcquireIo io_;
  bool cancel_heard_ = false;  // the machine was told of cancelled_ (read under mu_)
  AcquireAction::Kind waits_for_ = AcquireAction::Kind::none;  // wait_turn or wait
  std::optional<Clock::time_point> timer_;                     // the earliest timer still to fire
};

}  // namespace fairsem::detail
