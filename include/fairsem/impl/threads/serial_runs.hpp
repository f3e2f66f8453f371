#pragma once

// "Run this one at a time": work that any thread may ask for (an asynchronous acquire's step,
// a semaphore's background leaves) runs on one thread at a time, and a run asked for while one
// is under way is not lost: the run under way goes on (once, however often it was asked). What
// a run does, and on which thread it runs (the caller's, or a worker's it posts to), is its
// owner's. Guarded by its owner's mutex. Internal.
//
// Not the admission line (runtime/admission.hpp), which orders requests by call rather than
// coalescing runs: each request there is one entry, run in submission order, and the turn it is
// given outlives its run (held until its first call is answered, on whatever thread that is),
// with blocking callers waiting in the same line.

namespace fairsem::detail {

class SerialRuns {
 public:
  /// Asks for a run: true when the caller is to run it now (none is under way); false when the
  /// run under way is to go on after what it does now.
  bool enter() noexcept {
    if (running_) {
      again_ = true;
      return false;
    }
    running_ = true;
    return true;
  }
  /// The run is done with what it had: true when it was asked for meanwhile (the caller runs
  /// again); false when it is over.
  bool again() noexcept {
    if (again_) {
      again_ = false;
      return true;
    }
    running_ = false;
    return false;
  }
  /// The run is over, asked for meanwhile or not (its owner is done with the work).
  void end() noexcept { running_ = again_ = false; }
  /// A run is under way (or posted to run).
  bool running() const noexcept { return running_; }

 private:
  bool running_ = false;
  bool again_ = false;
};

}  // namespace fairsem::detail
