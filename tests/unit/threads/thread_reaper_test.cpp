// join_or_park: an owner of threads lets go of one by joining it, or, when the owner is destroyed
// on that very thread, by parking it to be joined once it has finished; never by detaching it.

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "fairsem/impl/threads/thread_reaper.hpp"
#include "wait.hpp"

namespace fairsem::detail {
namespace {

/// Starts `owned` on a thread that lets go of its own handle, as an owner destroyed on its own
/// thread does; returns once it has.
void let_go_of_itself(std::thread& owned) {
  std::promise<void> handed;
  std::promise<void> let_go;
  owned = std::thread([&, handed_over = handed.get_future()] {
    handed_over.wait();
    join_or_park(owned);
    let_go.set_value();
  });
  handed.set_value();
  let_go.get_future().wait();
}

TEST(ThreadReaperTest, AnotherThreadIsJoined) {
  join_finished_parked_threads();
  const std::size_t parked = parked_threads();
  std::atomic<bool> ran{false};
  std::thread t([&] { ran = true; });
  join_or_park(t);
  EXPECT_FALSE(t.joinable());
  EXPECT_TRUE(ran);
  EXPECT_EQ(parked, parked_threads());
}

TEST(ThreadReaperTest, AThreadLettingGoOfItselfIsParkedAndJoinedOnceFinished) {
  join_finished_parked_threads();
  const std::size_t parked = parked_threads();
  std::thread owned;
  let_go_of_itself(owned);
  EXPECT_FALSE(owned.joinable());
  EXPECT_EQ(parked + 1, parked_threads()) << "parked, not detached";
  // Joined once it has finished (here by the test; otherwise by the next park, or at exit).
  EXPECT_TRUE(test::wait_until([&] {
    join_finished_parked_threads();
    return parked_threads() == parked;
  }));
}

// One handler for the process, however many threads park: one per park grew the exit list for
// as long as the process ran.
TEST(ThreadReaperTest, OneExitHandlerHoweverManyThreadsPark) {
  join_finished_parked_threads();
  const std::size_t parked = parked_threads();
  for (int i = 0; i < 100; ++i) {
    std::thread owned;
    let_go_of_itself(owned);
  }
  EXPECT_EQ(exit_handlers_registered(), 1U);
  EXPECT_TRUE(test::wait_until([&] {
    join_finished_parked_threads();
    return parked_threads() == parked;
  }));
}

TEST(ThreadReaperTest, AnEmptyHandleIsLeftAlone) {
  std::thread none;
  join_or_park(none);
  EXPECT_FALSE(none.joinable());
}

}  // namespace
}  // namespace fairsem::detail
