#pragma once

// A Client's callback thread: runs the user code that the renewal lanes (watchdog.hpp) would
// otherwise run on their own time (on_lost, on_renew_failure, the logger), one call at a time,
// in the order they were posted. A renewal never waits for it. An Executor of one thread
// (executor.hpp), whose post() throws std::system_error if the thread cannot start (nothing is
// queued then) and is ignored once stopped. Every task holds the semaphore it calls back for,
// and so the Client, so none is left queued when the Client's runtime stops it (on the thread
// itself, a callback that dropped the last reference to the Client, it is parked). Internal.

#include "fairsem/impl/threads/executor.hpp"

namespace fairsem::detail {

class Notifier : public Executor {
 public:
  /// Starts nothing yet: the thread starts with the first task.
  Notifier() : Executor(1) {}

  /// The Notifier to which the renewal callbacks of this thread go: set by a renewal lane for
  /// its thread; null on every other thread, whose callbacks run where they happen.
  static Notifier* of_this_thread() noexcept;
  static void set_for_this_thread(Notifier* notifier) noexcept;
};

}  // namespace fairsem::detail
