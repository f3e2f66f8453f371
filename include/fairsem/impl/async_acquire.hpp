#pragma once

// One asynchronous acquire: the blocking acquire's steps (queue, wait for the wake-up, poll,
// give up) as a state machine that runs on the Client's worker threads, a step at a time,
// moved on by its wake-up, its timer and cancel(). Internal.

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "fairsem/impl/admission.hpp"
#include "fairsem/impl/replies.hpp"
#include "fairsem/semaphore.hpp"

namespace fairsem::detail {

class SemaphoreCore;
class WakeSubscription;

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
  /// What one step does. Throws what the blocking acquire would.
  void advance();
  /// The step before the request has an entry: waits for its turn (true: nothing more to do
  /// in this step), then queues it, or tries (no time to wait). True when it finished.
  bool first_call();
  /// Queues; true when granted at once. `turn` is done once the call is answered.
  bool queue(AdmissionTurn& turn);
  /// True when a wake-up came that grants the permit as the last call left it.
  bool woken(bool& poll_now);
  /// Polls; true when granted.
  bool poll();
  /// A timer for the next poll or the deadline, unless one comes soon enough.
  void arm_timer();
  void leave() noexcept;
  /// Completes the request (once): the callback runs on this thread. A request cancelled
  /// meanwhile completes with its cancellation instead.
  void finish(const std::exception_ptr& outcome, std::optional<Permit> permit);
  /// advance() threw: leaves the queue as the blocking acquire would, then completes.
  void fail(const std::exception_ptr& error);

  const std::shared_ptr<SemaphoreCore> core_;
  const long long units_;
  const std::optional<Clock::time_point> deadline_;
  const Clock::time_point started_ = Clock::now();
  AcquireCallback done_;
  std::string id_;

  std::mutex mu_;  // guards the five below
  bool running_ = false;
  bool again_ = false;
  bool finished_ = false;
  std::exception_ptr cancelled_;
  std::optional<AdmissionTurn> turn_;  // given by admitted(), taken by the next step

  // Touched only by the step that runs.
  bool asked_ = false;   // the first call was sent (it may have queued even if it threw)
  bool queued_ = false;  // the first call answered: the request has an entry
  AcquireReply reply_;
  Clock::time_point sent_;
  Clock::time_point next_poll_ = Clock::time_point::max();  // none before the first call
  std::optional<Clock::time_point> timer_;                  // the earliest timer still to fire
  bool reported_ = false;  // a refused BRPOP was logged for this wait
  std::unique_ptr<WakeSubscription> wake_up_;
};

}  // namespace fairsem::detail
