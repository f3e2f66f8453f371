#pragma once

// The user callbacks of one semaphore that run on its Client's callback thread (on_lost,
// on_renew_failure, the logger: notifier.hpp): how many are posted and not yet done, and
// whether the semaphore's last user handle (its FairSemaphore, its Permits) is gone. The last
// handle's destructor closes the gate and waits until the callbacks posted before have run, so
// that none runs after it returns: a callback may use what its owner destroys next. Internal.

#include <condition_variable>
#include <cstddef>
#include <mutex>

namespace fairsem::detail {

class CallbackGate {
 public:
  /// Counts a callback about to be posted; false once closed (it is not called at all).
  bool enter() {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return false;
    ++pending_;
    return true;
  }
  /// A callback counted by enter() has run, or will not.
  void leave() noexcept {
    {
      std::lock_guard<std::mutex> lock(mu_);
      --pending_;
    }
    cv_.notify_all();
  }
  /// No callback is posted from now on; waits until those posted have run, unless `wait` is
  /// false (on fairsem's own threads: a callback that destroys its own semaphore's last
  /// handle would wait for itself).
  void close(bool wait) noexcept {
    std::unique_lock<std::mutex> lock(mu_);
    closed_ = true;
    if (wait) cv_.wait(lock, [&] { return pending_ == 0; });
  }
  /// A new user handle (a Permit granted after the others were gone): callbacks run again.
  void reopen() noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = false;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::size_t pending_ = 0;
  bool closed_ = false;
};

}  // namespace fairsem::detail
