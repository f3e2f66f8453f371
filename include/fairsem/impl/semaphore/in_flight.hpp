#pragma once

// InFlight: a semaphore's asynchronous requests under way, which a FairSemaphore handle that
// goes away cancels and waits for. Internal: nothing public includes this header. Defined in
// in_flight-inl.hpp.

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace fairsem::detail {

class AsyncAcquire;

/// A semaphore's asynchronous requests: the pending ones (owned here; their timers and wake-up
/// hooks hold them weakly), and the steps under way on a worker thread (or the waker's), each
/// counted until it has let go of every reference it held. What a FairSemaphore handle that
/// goes away cancels and waits for.
struct InFlight {
  std::mutex mu;
  std::condition_variable cv;
  std::unordered_map<AsyncAcquire*, std::shared_ptr<AsyncAcquire>> pending;
  std::size_t steps = 0;
  bool closing = false;  // snapshot(true) ran: new requests are refused

  /// Counts one step for its lifetime.
  class Step {
   public:
    explicit Step(InFlight& in_flight);
    ~Step();
    Step(const Step&) = delete;
    Step& operator=(const Step&) = delete;

   private:
    InFlight& in_flight_;
  };
  /// Registers a pending request; false once closing.
  bool add(const std::shared_ptr<AsyncAcquire>& request);
  /// No longer pending (completed).
  void remove(AsyncAcquire* request);
  /// The pending requests, now; with `close`, refuses new ones from now on.
  std::vector<std::shared_ptr<AsyncAcquire>> snapshot(bool close);
  /// Until no request is pending and no step is under way.
  void wait_idle();
};

}  // namespace fairsem::detail
