// OwnedThread, the one way fairsem's thread owners keep a thread: started once however often
// asked, a thread that retired idle joined by the next start (never left behind), stopped by
// stop_threads from any thread, and parked, never detached, when stopped from its own.

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "fairsem/impl/threads/owned_thread.hpp"
#include "fairsem/impl/threads/thread_reaper.hpp"
#include "wait.hpp"

namespace fairsem::detail {
namespace {

/// An owner as fairsem's are: a mutex guarding its thread and its stop flag, a thread that
/// waits for work or the stop, and retires when told it is idle.
struct Owner {
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  bool idle = false;  // the thread retires at its next look
  std::atomic<int> started{0};
  OwnedThread thread;

  /// Starts the thread unless it runs; what retired is let go of after the lock.
  void start() {
    OwnedThread ended;
    {
      std::lock_guard<std::mutex> lock(mu);
      idle = false;
      ended = thread.start([this] { run(); });
    }
    ended.let_go();
  }
  void run() {
    ++started;
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return stop || idle; });
    if (!stop) thread.retire();
  }
  bool running() {
    std::lock_guard<std::mutex> lock(mu);
    return thread.running();
  }
  void stop_now() noexcept {
    stop_threads(
        mu,
        [&](std::vector<OwnedThread>& ending) {
          stop = true;
          ending.push_back(thread.take());
        },
        [&] { cv.notify_all(); });
  }
};

TEST(OwnedThreadTest, StartsOnceHoweverOftenAskedAndStopsJoined) {
  Owner owner;
  EXPECT_FALSE(owner.running());
  for (int i = 0; i < 5; ++i) owner.start();
  EXPECT_TRUE(owner.running());
  owner.stop_now();
  EXPECT_EQ(owner.started.load(), 1) << "one thread for every start while it runs";
  EXPECT_FALSE(owner.running());
}

TEST(OwnedThreadTest, AThreadThatRetiredIsJoinedByTheNextStart) {
  join_finished_parked_threads();
  const std::size_t parked = parked_threads();
  Owner owner;
  owner.start();
  {
    std::lock_guard<std::mutex> lock(owner.mu);
    owner.idle = true;
  }
  owner.cv.notify_all();
  ASSERT_TRUE(test::wait_until([&] { return !owner.running(); })) << "it never retired";
  {
    std::lock_guard<std::mutex> lock(owner.mu);
    EXPECT_TRUE(owner.thread.retired());
  }
  owner.start();  // joins the one that retired, and starts another
  EXPECT_TRUE(owner.running());
  owner.stop_now();
  EXPECT_EQ(owner.started.load(), 2);
  EXPECT_EQ(parked_threads(), parked) << "a retired thread was parked, not joined";
}

TEST(OwnedThreadTest, StoppedFromItsOwnThreadItIsParkedNotDetached) {
  join_finished_parked_threads();
  const std::size_t parked = parked_threads();
  auto owner = std::make_shared<Owner>();
  std::promise<void> stopped;
  {
    std::lock_guard<std::mutex> lock(owner->mu);
    owner->thread.start([&stopped, weak = std::weak_ptr<Owner>(owner)] {
      if (auto self = weak.lock()) self->stop_now();
      stopped.set_value();
    });
  }
  stopped.get_future().wait();
  EXPECT_EQ(parked + 1, parked_threads()) << "parked, not detached";
  EXPECT_TRUE(test::wait_until([&] {
    join_finished_parked_threads();
    return parked_threads() == parked;
  })) << "the parked thread was never joined";
}

}  // namespace
}  // namespace fairsem::detail
