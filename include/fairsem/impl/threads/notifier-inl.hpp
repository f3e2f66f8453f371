#pragma once

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/threads/notifier.hpp"
#include "fairsem/impl/threads/thread_reaper.hpp"

#include <utility>

namespace fairsem::detail {

namespace notifier_helpers {

FAIRSEM_INLINE thread_local Notifier* this_threads_notifier = nullptr;

}  // namespace notifier_helpers

FAIRSEM_INLINE Notifier::~Notifier() { stop(); }

FAIRSEM_INLINE Notifier* Notifier::of_this_thread() noexcept {
  return notifier_helpers::this_threads_notifier;
}

FAIRSEM_INLINE void Notifier::set_for_this_thread(Notifier* notifier) noexcept {
  notifier_helpers::this_threads_notifier = notifier;
}

FAIRSEM_INLINE void Notifier::post(Task task) {
  {
    std::lock_guard<std::mutex> lock(queue_->mu);
    if (queue_->stop) return;
    if (!thread_.joinable()) thread_ = std::thread(&Notifier::run, queue_);
    queue_->tasks.push_back(std::move(task));
  }
  queue_->cv.notify_one();
}

FAIRSEM_INLINE void Notifier::stop() noexcept {
  std::thread thread;
  {
    std::lock_guard<std::mutex> lock(queue_->mu);
    queue_->stop = true;
    thread = std::move(thread_);
  }
  queue_->cv.notify_all();
  join_or_park(thread);
}

FAIRSEM_INLINE void Notifier::run(const std::shared_ptr<Queue>& queue) {
  mark_as_fairsems_thread();
  std::unique_lock<std::mutex> lock(queue->mu);
  for (;;) {
    queue->cv.wait(lock, [&] { return queue->stop || !queue->tasks.empty(); });
    if (queue->stop) return;
    Task task = std::move(queue->tasks.front());
    queue->tasks.pop_front();
    lock.unlock();
    task();          // the tasks catch what the callbacks throw
    task = nullptr;  // what it holds (the last reference to a Client, maybe) let go unlocked
    lock.lock();
  }
}

}  // namespace fairsem::detail
