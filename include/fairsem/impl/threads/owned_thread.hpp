#pragma once

// One thread of an owner (a worker of the Executor, a Waker's thread, a Watchdog lane's), the
// one way every owner of a thread keeps it: started on first need, retired by the thread itself
// when it ends idle (and then joined by the next start), stopped by its owner, which joins it, or
// parks it when stopped from that very thread (thread_reaper.hpp). It is guarded by its owner's
// mutex, which is also what the thread takes to see that it is to stop: the owner takes the
// thread out under that mutex and lets go of it after (stop_threads). Internal.

#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace fairsem::detail {

class OwnedThread {
 public:
  OwnedThread() noexcept = default;
  /// let_go(): its owner has asked it to end first.
  ~OwnedThread() { let_go(); }
  OwnedThread(OwnedThread&& other) noexcept
      : thread_(std::move(other.thread_)), retired_(std::exchange(other.retired_, false)) {}
  /// let_go() first.
  OwnedThread& operator=(OwnedThread&& other) noexcept;
  OwnedThread(const OwnedThread&) = delete;
  OwnedThread& operator=(const OwnedThread&) = delete;

  /// With the owner's mutex held: runs `body` on a new thread unless one runs (the first need,
  /// or the first after it retired). The thread that retired is handed back, to let go of after
  /// the mutex (it may still be closing what it held). Throws std::system_error if no thread can
  /// start (nothing changes then).
  template <class Body>
  OwnedThread start(Body&& body) {
    if (running()) return {};
    std::thread started(std::forward<Body>(body));
    OwnedThread ended = take();
    thread_ = std::move(started);
    return ended;
  }
  /// With the owner's mutex held: started, and neither retired nor taken.
  bool running() const noexcept { return thread_.joinable() && !retired_; }
  /// With the owner's mutex held: the thread has retired (joined by the next start()).
  bool retired() const noexcept { return retired_; }
  /// By the thread itself, with the owner's mutex held, as it ends idle: it touches nothing of
  /// its owner's afterwards; the next start(), or the owner's stop, joins it.
  void retire() noexcept { retired_ = true; }
  /// With the owner's mutex held: the thread (running or retired) moved out, to let go of after
  /// the mutex (the thread takes it to see that it is to stop). Empty afterwards.
  OwnedThread take() noexcept;
  /// Joins the thread, or parks it when this is that thread (thread_reaper.hpp). Not with the
  /// owner's mutex held. Empty afterwards.
  void let_go() noexcept;

 private:
  std::thread thread_;
  bool retired_ = false;
};

/// Stops an owner's threads, the one way: with `mu` held, `ask(ending)` sets the owner's stop
/// flag and moves its threads into `ending` (OwnedThread::take); after the mutex, `wake()` ends
/// the threads' waits; then each thread is joined, or parked if it is this one.
template <class Ask, class Wake>
void stop_threads(std::mutex& mu, Ask&& ask, Wake&& wake) noexcept {
  std::vector<OwnedThread> ending;
  {
    std::lock_guard<std::mutex> lock(mu);
    ask(ending);
  }
  wake();
  for (OwnedThread& thread : ending) thread.let_go();
}

}  // namespace fairsem::detail
