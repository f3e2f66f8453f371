// Notifier, the callback thread of a Client's renewal lanes: runs what is posted one at a time,
// in the order posted, on a thread of its own; stopped on that very thread, it is parked, never
// detached.

#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "fairsem/impl/threads/notifier.hpp"
#include "fairsem/impl/threads/thread_reaper.hpp"
#include "wait.hpp"

namespace fairsem::detail {
namespace {

TEST(NotifierTest, RunsTasksInTheOrderPostedOnAThreadOfItsOwn) {
  Notifier notifier;
  std::mutex mu;
  std::vector<int> order;
  std::thread::id ran_on;
  std::promise<void> go;
  std::shared_future<void> started = go.get_future().share();
  // The first task blocks: the others queue behind it, and run after it in order.
  notifier.post([&, started] {
    started.wait();
    std::lock_guard<std::mutex> lock(mu);
    ran_on = std::this_thread::get_id();
    order.push_back(0);
  });
  for (int i = 1; i < 100; ++i) {
    notifier.post([&, i] {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(i);
    });
  }
  go.set_value();
  ASSERT_TRUE(test::wait_until([&] {
    std::lock_guard<std::mutex> lock(mu);
    return order.size() == 100;
  }));
  std::lock_guard<std::mutex> lock(mu);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST(NotifierTest, OnlyTheThreadsALaneMarksPostThere) {
  EXPECT_EQ(Notifier::of_this_thread(), nullptr);
  Notifier notifier;
  std::thread lane([&] {
    Notifier::set_for_this_thread(&notifier);
    EXPECT_EQ(Notifier::of_this_thread(), &notifier);
  });
  lane.join();
  EXPECT_EQ(Notifier::of_this_thread(), nullptr);
}

TEST(NotifierTest, StoppedByItsOwnTaskItIsParkedNotDetached) {
  join_finished_parked_threads();
  const std::size_t parked = parked_threads();
  auto notifier = std::make_shared<Notifier>();
  std::promise<void> done;
  // As a callback that drops the last reference to its Client does.
  notifier->post([&done, owner = std::weak_ptr<Notifier>(notifier)]() mutable {
    if (auto n = owner.lock()) n->stop();
    done.set_value();
  });
  done.get_future().wait();
  EXPECT_EQ(parked + 1, parked_threads()) << "parked, not detached";
  EXPECT_TRUE(test::wait_until([&] {
    join_finished_parked_threads();
    return parked_threads() == parked;
  })) << "the parked thread was never joined";
  notifier.reset();
}

}  // namespace
}  // namespace fairsem::detail
