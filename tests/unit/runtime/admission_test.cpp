// Admission, with no server: the line in which one semaphore's requests send their first call.
// Jobs (asynchronous requests) run one at a time in submission order, on real worker threads;
// a blocking request goes at once when nobody is in line and otherwise waits its turn; one
// whose deadline passes in line is withdrawn; a turn handed on by a request that is gone, or
// never taken, does not stop the line.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "fairsem/impl/runtime/admission.hpp"
#include "fairsem/impl/threads/executor.hpp"
#include "wait.hpp"

namespace fairsem::detail {
namespace {

using namespace std::chrono_literals;
using test::wait_until;

TEST(AdmissionTest, JobsRunOneAtATimeInSubmissionOrder) {
  Executor executor(4);
  auto admission = std::make_shared<Admission>(executor);
  std::mutex mu;
  std::vector<int> order;
  std::atomic<int> holding{0};
  std::atomic<int> overlaps{0};
  constexpr int kJobs = 1000;
  for (int i = 0; i < kJobs; ++i) {
    admission->submit([&, i](AdmissionTurn turn) {
      EXPECT_TRUE(turn.held());
      if (holding.fetch_add(1) != 0) ++overlaps;
      {
        std::lock_guard<std::mutex> lock(mu);
        order.push_back(i);
      }
      holding.fetch_sub(1);
      if (i % 2 == 0) turn.done();  // the others hand it on as they return
    });
  }
  ASSERT_TRUE(wait_until([&] {
    std::lock_guard<std::mutex> lock(mu);
    return order.size() == kJobs;
  }));
  EXPECT_EQ(overlaps.load(), 0);
  for (int i = 0; i < kJobs; ++i) ASSERT_EQ(order[i], i) << "job " << i << " ran out of order";
}

TEST(AdmissionTest, ABlockingRequestGoesAtOnceWhenNobodyIsInLine) {
  Executor executor(1);
  auto admission = std::make_shared<Admission>(executor);
  std::optional<AdmissionTurn> first = admission->wait(std::nullopt);
  ASSERT_TRUE(first);
  EXPECT_FALSE(first->held());  // nothing to hand on: blocking requests go side by side
  std::optional<AdmissionTurn> second = admission->wait(std::nullopt);
  ASSERT_TRUE(second);
  EXPECT_FALSE(second->held());
  // ... and a job submitted meanwhile runs without waiting for them.
  std::promise<void> ran;
  admission->submit([&](AdmissionTurn) { ran.set_value(); });
  EXPECT_EQ(ran.get_future().wait_for(30s), std::future_status::ready);
}

// A job that keeps its turn until told, to put requests in line behind it.
struct Holder {
  std::promise<AdmissionTurn> turn;
  std::future<AdmissionTurn> taken = turn.get_future();
  void submit_to(Admission& admission) {
    admission.submit([this](AdmissionTurn t) { turn.set_value(std::move(t)); });
  }
};

TEST(AdmissionTest, ABlockingRequestWaitsForTheJobsSubmittedBeforeIt) {
  Executor executor(2);
  auto admission = std::make_shared<Admission>(executor);
  Holder holder;
  holder.submit_to(*admission);
  AdmissionTurn held = holder.taken.get();
  std::atomic<bool> went{false};
  std::thread blocking([&] {
    std::optional<AdmissionTurn> turn = admission->wait(std::nullopt);
    EXPECT_TRUE(turn && turn->held());
    went = true;
  });
  ASSERT_TRUE(wait_until([&] { return admission->waiting() == 1; }));
  EXPECT_FALSE(went.load());
  held.done();
  blocking.join();
  EXPECT_TRUE(went.load());
  EXPECT_EQ(admission->waiting(), 0U);
}

TEST(AdmissionTest, RequestsOfBothKindsTakeTheirTurnsInTheOrderTheyCame) {
  Executor executor(2);
  auto admission = std::make_shared<Admission>(executor);
  Holder first;
  first.submit_to(*admission);
  AdmissionTurn held = first.taken.get();
  std::mutex mu;
  std::vector<std::string> order;
  const auto record = [&](const char* what) {
    std::lock_guard<std::mutex> lock(mu);
    order.emplace_back(what);
  };
  std::thread blocking([&] {
    std::optional<AdmissionTurn> turn = admission->wait(std::nullopt);
    record("blocking");
  });
  ASSERT_TRUE(wait_until([&] { return admission->waiting() == 1; }));
  std::promise<void> last_ran;
  admission->submit([&](AdmissionTurn) {
    record("job");
    last_ran.set_value();
  });
  EXPECT_EQ(admission->waiting(), 2U);
  held.done();
  blocking.join();
  ASSERT_EQ(last_ran.get_future().wait_for(30s), std::future_status::ready);
  EXPECT_EQ(order, (std::vector<std::string>{"blocking", "job"}));
}

TEST(AdmissionTest, ADeadlinePassedInLineWithdrawsTheRequestAndTheLineGoesOn) {
  Executor executor(2);
  auto admission = std::make_shared<Admission>(executor);
  Holder holder;
  holder.submit_to(*admission);
  AdmissionTurn held = holder.taken.get();
  EXPECT_FALSE(admission->wait(std::chrono::steady_clock::now() + 20ms));
  EXPECT_EQ(admission->waiting(), 0U);
  std::promise<void> next_ran;
  admission->submit([&](AdmissionTurn) { next_ran.set_value(); });
  held.done();
  EXPECT_EQ(next_ran.get_future().wait_for(30s), std::future_status::ready);
}

TEST(AdmissionTest, ATurnLetGoOfWithoutUseHandsItOn) {
  Executor executor(2);
  auto admission = std::make_shared<Admission>(executor);
  // A request that ended while in line: its job only lets the turn go.
  admission->submit([](AdmissionTurn) {});
  std::promise<void> next_ran;
  admission->submit([&](AdmissionTurn) { next_ran.set_value(); });
  ASSERT_EQ(next_ran.get_future().wait_for(30s), std::future_status::ready);
  // A turn moved over another passes the other one on first.
  Holder a;
  a.submit_to(*admission);
  AdmissionTurn first = a.taken.get();
  std::promise<void> b_ran;
  std::promise<AdmissionTurn> b_turn;
  admission->submit([&](AdmissionTurn t) {
    b_ran.set_value();
    b_turn.set_value(std::move(t));
  });
  first = AdmissionTurn();  // done: b runs
  ASSERT_EQ(b_ran.get_future().wait_for(30s), std::future_status::ready);
  AdmissionTurn second = b_turn.get_future().get();
  EXPECT_TRUE(second.held());
  second.done();
  EXPECT_FALSE(second.held());
  second.done();  // twice is harmless
  std::optional<AdmissionTurn> free_again = admission->wait(std::nullopt);
  ASSERT_TRUE(free_again);
  EXPECT_FALSE(free_again->held());  // nobody in line any more
}

}  // namespace
}  // namespace fairsem::detail
