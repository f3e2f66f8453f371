// ClientOptions::batch_calls end to end: a Client whose threads' calls go in batches keeps the
// limit, serves every waiter, and its cancelled requests leave nothing behind. (That calls do go
// in batches, and what a batch does when its socket fails or a call is cancelled while queued,
// is call_batcher_test.cpp's.)

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "queued_waiters.hpp"
#include "redis_server.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using test::RedisServer;

TEST(BatchCallsTest, ThreadsWhoseCallsGoInBatchesKeepTheLimitAndAreAllServed) {
  RedisServer server;
  ClientOptions co;
  co.batch_calls = true;
  Client client(server.options(), co);
  SemaphoreOptions o;
  o.limit = 3;
  o.lease = 10s;
  o.key_prefix = test::unique_prefix();
  FairSemaphore sem(client, "batched", o);

  constexpr int kThreads = 12;
  constexpr int kRounds = 40;
  std::atomic<int> holding{0};
  std::atomic<int> most{0};
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        Permit p = sem.acquire();
        const int now = ++holding;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        ++granted;
        --holding;
        EXPECT_EQ(p.release(), ReleaseResult::released);
      }
    });
  }
  // Beside them, asynchronous requests, every other one cancelled at once; each kept one is
  // released as soon as it is served.
  std::atomic<int> served{0};
  std::atomic<int> cancelled{0};
  std::thread requester([&] {
    for (int i = 0; i < 40; ++i) {
      if (i % 2 == 1) {
        AcquireRequest r = sem.acquire_async([](std::exception_ptr, std::optional<Permit>) {});
        if (r.cancel()) ++cancelled;
        continue;
      }
      std::optional<Permit> p = sem.try_acquire_for_async(30s).get();
      ASSERT_TRUE(p) << "a request with 30 s to wait was not served";
      ++served;
      EXPECT_EQ(p->release(), ReleaseResult::released);
    }
  });
  for (std::thread& t : threads) t.join();
  requester.join();
  EXPECT_EQ(granted.load(), kThreads * kRounds);
  EXPECT_EQ(served.load(), 20);
  EXPECT_LE(most.load(), 3) << "more holders at once than the limit";
  // The cancelled requests' entries are gone, not left to expire.
  EXPECT_TRUE(test::wait_until([&] { return test::queue_empty(sem); }, 10s))
      << cancelled.load() << " requests were cancelled";
  // Twelve threads calling at once: some of their calls shared a write, and the handle says so.
  EXPECT_GT(sem.metrics().batched_calls, 0u);
}

TEST(BatchCallsTest, WithoutTheOptionNoCallIsCountedAsBatched) {
  RedisServer server;
  Client client(server.options());  // batch_calls off, the default
  SemaphoreOptions o;
  o.limit = 2;
  o.key_prefix = test::unique_prefix();
  FairSemaphore sem(client, "alone", o);
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) EXPECT_EQ(sem.acquire().release(), ReleaseResult::released);
    });
  }
  for (std::thread& t : threads) t.join();
  const Metrics m = sem.metrics();
  EXPECT_EQ(m.grants, 120u);
  EXPECT_EQ(m.batched_calls, 0u);
}

}  // namespace
}  // namespace fairsem
