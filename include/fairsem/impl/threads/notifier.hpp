#pragma once

// A Client's callback thread: runs the user code that the renewal lanes (watchdog.hpp) would
// otherwise run on their own time (on_lost, on_renew_failure, the logger), one call at a time,
// in the order they were posted. A renewal never waits for it. Internal.

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace fairsem::detail {

class Notifier {
 public:
  using Task = std::function<void()>;

  /// Starts nothing yet: the thread starts with the first task.
  Notifier() = default;
  /// stop().
  ~Notifier();
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  /// Runs `task` on the callback thread after every task posted before it. Throws
  /// std::system_error if the thread cannot start (nothing is queued then). Ignored once
  /// stopped.
  void post(Task task);
  /// Runs no further task and joins the thread; on the thread itself (a callback dropped the
  /// last reference to the Client) parks it (thread_reaper.hpp). Every task holds the
  /// semaphore it calls back for, and so the Client, so none is left queued when the Client's
  /// runtime stops it.
  void stop() noexcept;

  /// The Notifier to which the renewal callbacks of this thread go: set by a renewal lane for
  /// its thread; null on every other thread, whose callbacks run where they happen.
  static Notifier* of_this_thread() noexcept;
  static void set_for_this_thread(Notifier* notifier) noexcept;

 private:
  /// Shared with the thread, so that it outlives a Notifier destroyed on it.
  struct Queue {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Task> tasks;
    bool stop = false;
  };
  static void run(const std::shared_ptr<Queue>& queue);

  const std::shared_ptr<Queue> queue_ = std::make_shared<Queue>();
  std::thread thread_;  // guarded by queue_->mu
};

}  // namespace fairsem::detail
