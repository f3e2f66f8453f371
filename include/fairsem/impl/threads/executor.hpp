#pragma once

// The Client's worker threads for asynchronous acquires: a fixed number of threads run posted
// tasks (script calls, so they may block for one round trip) and tasks due at a time (polls and
// deadlines). With one thread, the tasks run one at a time in the order posted (Notifier).
// Internal.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "fairsem/impl/threads/owned_thread.hpp"

namespace fairsem::detail {

class Executor {
 public:
  using Task = std::function<void()>;
  using Clock = std::chrono::steady_clock;

  /// Starts nothing yet: the threads start with the first task.
  explicit Executor(std::size_t threads);
  /// stop().
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  /// Runs `task` on a worker thread soon. Throws std::system_error if no thread can start.
  void post(Task task);
  /// Runs `task` on a worker thread at `when` (or soon after).
  void post_at(Clock::time_point when, Task task);
  /// Runs no further task (those still queued are dropped; later ones are ignored) and joins
  /// the threads; a thread that stops its Executor (the last reference dropped by one of its
  /// tasks) is parked (thread_reaper.hpp), and leaves touching nothing of the Executor's.
  void stop() noexcept;

 private:
  /// What the threads use: shared with them, so it outlives an Executor destroyed on one.
  struct Queue {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Task> ready;
    std::multimap<Clock::time_point, Task> timed;
    bool stop = false;
  };
  static void run(const std::shared_ptr<Queue>& queue);
  void start_threads();  // with queue_->mu held

  const std::shared_ptr<Queue> queue_ = std::make_shared<Queue>();
  std::vector<OwnedThread> threads_;  // guarded by queue_->mu
};

}  // namespace fairsem::detail
