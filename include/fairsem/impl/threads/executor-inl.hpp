#pragma once

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/threads/executor.hpp"
#include "fairsem/impl/threads/thread_reaper.hpp"

#include <utility>

namespace fairsem::detail {

FAIRSEM_INLINE Executor::Executor(std::size_t threads) : threads_(threads) {}

FAIRSEM_INLINE Executor::~Executor() { stop(); }

FAIRSEM_INLINE void Executor::stop() noexcept {
  stop_threads(
      queue_->mu,
      [&](std::vector<OwnedThread>& ending) {
        queue_->stop = true;
        for (OwnedThread& t : threads_) ending.push_back(t.take());
      },
      [&] { queue_->cv.notify_all(); });
}

FAIRSEM_INLINE void Executor::start_threads() {
  for (OwnedThread& t : threads_) t.start([queue = queue_] { run(queue); });
}

FAIRSEM_INLINE void Executor::post(Task task) {
  {
    std::lock_guard<std::mutex> lock(queue_->mu);
    if (queue_->stop) return;
    start_threads();
    queue_->ready.push_back(std::move(task));
  }
  queue_->cv.notify_one();
}

FAIRSEM_INLINE void Executor::post_at(Clock::time_point when, Task task) {
  {
    std::lock_guard<std::mutex> lock(queue_->mu);
    if (queue_->stop) return;
    start_threads();
    queue_->timed.emplace(when, std::move(task));
  }
  // Every thread: the one that waits for the earliest time must see a new, earlier one.
  queue_->cv.notify_all();
}

FAIRSEM_INLINE void Executor::run(const std::shared_ptr<Queue>& queue) {
  mark_as_fairsems_thread();
  std::unique_lock<std::mutex> lock(queue->mu);
  for (;;) {
    if (queue->stop) return;
    const auto now = Clock::now();
    while (!queue->timed.empty() && queue->timed.begin()->first <= now) {
      queue->ready.push_back(std::move(queue->timed.begin()->second));
      queue->timed.erase(queue->timed.begin());
    }
    if (!queue->ready.empty()) {
      Task task = std::move(queue->ready.front());
      queue->ready.pop_front();
      lock.unlock();
      task();
      task = nullptr;  // what it holds is let go before the lock is taken again
      lock.lock();
      continue;
    }
    if (queue->timed.empty()) {
      queue->cv.wait(lock);
    } else {
      // A copy: another thread may take that task (and free its node) while this one waits.
      const Clock::time_point next = queue->timed.begin()->first;
      queue->cv.wait_until(lock, next);
    }
  }
}

}  // namespace fairsem::detail
