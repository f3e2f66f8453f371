#pragma once

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/threads/fork.hpp"
#include "fairsem/impl/threads/thread_reaper.hpp"

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace fairsem::detail {

namespace thread_reaper_helpers {

struct Parked {
  std::thread thread;
  std::shared_ptr<std::atomic<bool>> finished;  // set by the thread's last thread_local
};

struct Reaper {
  const OwnerProcess owner;  // a child made by fork() has none of the threads parked here
  std::mutex mu;
  std::vector<Parked> parked;
  bool exiting = false;  // the exit handler ran: a thread parked later is detached
};

FAIRSEM_INLINE thread_local bool fairsems_thread = false;

// Never destroyed: a thread may be parked while the process exits.
FAIRSEM_INLINE Reaper& reaper() {
  static auto* const instance = new Reaper;
  return *instance;
}

// Destroyed when its thread ends, after everything that thread ran; a join then waits only for
// the thread's own teardown.
struct FinishedMark {
  std::shared_ptr<std::atomic<bool>> flag;
  FinishedMark() = default;
  FinishedMark(const FinishedMark&) = delete;
  FinishedMark& operator=(const FinishedMark&) = delete;
  ~FinishedMark() {
    if (flag) flag->store(true, std::memory_order_release);
  }
};

FAIRSEM_INLINE std::vector<std::thread> take_finished(Reaper& r) {
  std::vector<std::thread> done;
  auto& parked = r.parked;
  for (auto it = parked.begin(); it != parked.end();) {
    if (it->finished->load(std::memory_order_acquire)) {
      done.push_back(std::move(it->thread));
      it = parked.erase(it);
    } else {
      ++it;
    }
  }
  return done;
}

// At exit every parked thread is joined (one that is the exiting thread itself is detached).
FAIRSEM_INLINE void join_at_exit() {
  Reaper& r = reaper();
  // A child made by fork() exits: its parent's parked threads are not its own (and a thread of
  // the parent may have held the lock at the fork).
  if (!r.owner.here()) return;
  std::vector<Parked> parked;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    r.exiting = true;
    parked = std::move(r.parked);
    r.parked.clear();
  }
  for (Parked& p : parked) {
    if (p.thread.get_id() == std::this_thread::get_id()) {
      p.thread.detach();
    } else {
      p.thread.join();
    }
  }
}

// The one exit handler, registered once, when the first of fairsem's threads starts: every
// thread that may park is one of those, so it runs after any park, and before the destructors of
// the static objects that existed then (Asio's system context is one from the program's start;
// OpenSSL is asked for no exit handler, tls.hpp). A handler registered at every park instead
// grew the exit list by one entry per park, for the life of the process.
FAIRSEM_INLINE std::atomic<std::size_t> exit_handlers{0};

FAIRSEM_INLINE void register_exit_handler() noexcept {
  static std::once_flag registered;
  try {
    std::call_once(registered, [] {
      if (std::atexit(join_at_exit) == 0) exit_handlers.fetch_add(1, std::memory_order_relaxed);
    });
  } catch (...) {
    // Without it, a thread parked at exit is not joined; the process ends it.
  }
}

}  // namespace thread_reaper_helpers

FAIRSEM_INLINE void join_or_park(std::thread& thread) noexcept {
  namespace h = thread_reaper_helpers;
  if (!thread.joinable()) return;
  if (thread.get_id() != std::this_thread::get_id()) {
    thread.join();
    return;
  }
  h::register_exit_handler();  // once; a thread fairsem did not start may park too
  h::Reaper& r = h::reaper();
  std::vector<std::thread> finished;
  try {
    auto flag = std::make_shared<std::atomic<bool>>(false);
    {
      std::lock_guard<std::mutex> lock(r.mu);
      if (r.exiting) {
        thread.detach();
        return;
      }
      r.parked.push_back(h::Parked{std::thread(), flag});
      r.parked.back().thread = std::move(thread);
      finished = h::take_finished(r);
    }
    thread_local h::FinishedMark mark;
    mark.flag = std::move(flag);
  } catch (...) {
    if (thread.joinable()) thread.detach();  // no memory to park it
  }
  for (std::thread& t : finished) t.join();
}

FAIRSEM_INLINE void mark_as_fairsems_thread() noexcept {
  thread_reaper_helpers::fairsems_thread = true;
  // Before any of them can park: a thread that parks itself while the process is exiting, with
  // no handler registered before, would be neither joined nor detached (seen once under
  // ThreadSanitizer as a leaked thread: a watchdog that dropped the last reference to its
  // Client in a renewal as main returned). With it, such a thread is joined by it, or detached
  // if it parks after it ran.
  thread_reaper_helpers::register_exit_handler();
}

FAIRSEM_INLINE bool on_fairsems_thread() noexcept { return thread_reaper_helpers::fairsems_thread; }

FAIRSEM_INLINE std::size_t parked_threads() noexcept {
  thread_reaper_helpers::Reaper& r = thread_reaper_helpers::reaper();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.parked.size();
}

FAIRSEM_INLINE std::size_t exit_handlers_registered() noexcept {
  return thread_reaper_helpers::exit_handlers.load(std::memory_order_relaxed);
}

FAIRSEM_INLINE void join_finished_parked_threads() noexcept {
  thread_reaper_helpers::Reaper& r = thread_reaper_helpers::reaper();
  std::vector<std::thread> finished;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    finished = thread_reaper_helpers::take_finished(r);
  }
  for (std::thread& t : finished) t.join();
}

}  // namespace fairsem::detail
