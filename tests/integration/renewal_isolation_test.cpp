// Renewal isolation on one server: user code that the renewal path calls (on_lost,
// on_renew_failure, the logger) runs off the renewal's critical time, so a callback that takes
// longer than another semaphore's lease costs that semaphore nothing. (Issue 28, item 1; the
// Cluster case, a hung master, is in deployment_renewal_test.cpp.) And once a semaphore's last
// handle is destroyed, none of its callbacks runs any more.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "semaphore_fixture.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::redis_options;
using test::wait_until;

class RenewalIsolationTest : public test::SemaphoreFixture {};

bool holds(FairSemaphore& sem, const std::string& id) {
  const Status s = sem.status();
  return std::any_of(s.holders.begin(), s.holders.end(),
                     [&](const PermitInfo& h) { return h.id == id; });
}

// A slow on_lost (held on a latch for longer than the other semaphore's lease) on one semaphore
// costs no permit on another semaphore of the same Client: the callback does not run where the
// renewals do.
TEST_F(RenewalIsolationTest, ASlowOnLostCostsAnotherSemaphoreNothing) {
  Client client(redis_options());
  std::promise<void> latch;
  const std::shared_future<void> released = latch.get_future().share();
  std::atomic<int> lost_calls{0};
  std::atomic<bool> entered{false};
  std::mutex mu;
  std::string lost_id;
  SemaphoreOptions slow_options = options(1, 1500ms);
  slow_options.on_lost = [&](const std::string& id, const std::string&) {
    {
      std::lock_guard<std::mutex> lock(mu);
      lost_id = id;
    }
    ++lost_calls;
    entered = true;
    released.wait();  // the test lets it return
  };
  FairSemaphore slow(client, "slow-callback", slow_options);
  const auto lease = 1500ms;
  SemaphoreOptions other_options = options(1, lease);
  std::atomic<int> other_lost{0};
  other_options.on_lost = [&](const std::string&, const std::string&) { ++other_lost; };
  FairSemaphore other(client, "other", other_options);

  Permit doomed = slow.acquire();
  Permit kept = other.acquire();
  // Both renewed once, so that both are under way on the renewal path.
  ASSERT_TRUE(wait_until([&] { return slow.metrics().renewals >= 1; }));
  ASSERT_TRUE(wait_until([&] { return other.metrics().renewals >= 1; }));

  // Taken away: the next renewal finds it evicted and calls on_lost, which blocks.
  ASSERT_EQ(slow.evict(doomed.id()), EvictResult::holder);
  ASSERT_TRUE(wait_until([&] { return entered.load(); }));
  const auto entered_at = Clock::now();
  // The callback takes 2 s, longer than the other permit's lease (1.5 s). All the while the
  // other permit must stay held.
  bool seen_lost = false;
  (void)wait_until([&] {
    seen_lost = seen_lost || kept.lost();
    return Clock::now() >= entered_at + 2s;
  });
  latch.set_value();

  EXPECT_FALSE(seen_lost) << "the other semaphore's permit ran out while on_lost blocked";
  EXPECT_FALSE(kept.lost());
  EXPECT_TRUE(holds(other, kept.id())) << "the other permit is gone from Redis";
  // Renewed since the callback started: its deadline is past where the lease would have ended.
  EXPECT_GT(kept.deadline(), entered_at + lease);
  EXPECT_EQ(other.metrics().permits_lost, 0u);
  EXPECT_EQ(other_lost.load(), 0);
  EXPECT_EQ(kept.release(), ReleaseResult::released);

  // The slow one: reported exactly once, for its own permit.
  EXPECT_TRUE(doomed.lost());
  EXPECT_EQ(lost_calls.load(), 1);
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(lost_id, doomed.id());
  }
  EXPECT_EQ(slow.metrics().permits_lost, 1u);
  EXPECT_EQ(doomed.release(), ReleaseResult::expired);
}

// The same with on_renew_failure and the logger: a renewal that fails (here: the semaphore's
// keys turned into a string behind its back, so that every renew call is refused) reports to
// both, and both block; another semaphore's permits stay renewed meanwhile.
TEST_F(RenewalIsolationTest, ASlowRenewFailureCallbackAndLoggerCostAnotherSemaphoreNothing) {
  Client client(redis_options());
  std::promise<void> latch;
  const std::shared_future<void> released = latch.get_future().share();
  std::atomic<int> failures{0};
  std::atomic<int> logged{0};
  SemaphoreOptions failing_options = options(1, 10s);
  failing_options.on_renew_failure = [&](const PermitInfo&, const std::string&) {
    ++failures;
    released.wait();
  };
  failing_options.logger = [&](LogLevel, std::string_view) {
    ++logged;
    released.wait();
  };
  FairSemaphore failing(client, "failing", failing_options);
  const auto lease = 1500ms;
  FairSemaphore other(client, "healthy", options(1, lease));

  Permit stuck = failing.acquire();
  Permit kept = other.acquire();
  ASSERT_TRUE(wait_until([&] { return other.metrics().renewals >= 1; }));
  // A key of the wrong type: the renew script refuses to run (WRONGTYPE-like refusal).
  admin_.command({"DEL", key("failing", "meta")});
  admin_.command({"SET", key("failing", "meta"), "not a hash"});
  ASSERT_TRUE(wait_until([&] { return failures.load() + logged.load() >= 1; }));
  const auto entered_at = Clock::now();
  bool seen_lost = false;
  (void)wait_until([&] {
    seen_lost = seen_lost || kept.lost();
    return Clock::now() >= entered_at + 2s;
  });
  latch.set_value();

  EXPECT_FALSE(seen_lost) << "the healthy permit ran out while a renewal callback blocked";
  EXPECT_FALSE(kept.lost());
  EXPECT_TRUE(holds(other, kept.id()));
  EXPECT_GT(kept.deadline(), entered_at + lease);
  EXPECT_EQ(other.metrics().permits_lost, 0u);
  EXPECT_EQ(kept.release(), ReleaseResult::released);
  admin_.command({"DEL", key("failing", "meta")});
}

// The destructor of a semaphore's last handle (here its FairSemaphore, after its Permit) waits
// for the callbacks posted for it, and none runs after it returns: a callback may use what its
// owner destroys next. (The test above once crashed after it ended, in CI's TLS pass: a
// renewal's callback, posted before the destructors, ran after the test's locals were gone.)
TEST_F(RenewalIsolationTest, NoCallbackRunsAfterTheSemaphoresLastHandleIsDestroyed) {
  Client client(redis_options());
  std::promise<void> latch;
  const std::shared_future<void> go = latch.get_future().share();
  std::atomic<int> calls{0};
  std::atomic<bool> destroyed{false};
  std::atomic<int> after{0};
  SemaphoreOptions o = options(1, 10s);
  o.renew_interval = 100ms;
  o.on_renew_failure = [&](const PermitInfo&, const std::string&) {
    if (destroyed.load()) ++after;
    if (calls++ == 0) go.wait();  // the first holds the callback thread; the next queue up
  };
  auto sem = std::make_unique<FairSemaphore>(client, "gate", o);
  auto permit = std::make_unique<Permit>(sem->acquire());
  admin_.command({"DEL", key("gate", "meta")});
  admin_.command({"SET", key("gate", "meta"), "not a hash"});  // every renewal is refused
  ASSERT_TRUE(wait_until([&] { return sem->metrics().renewal_failures >= 3; }));
  std::thread destroying([&] {
    permit.reset();
    sem.reset();
    destroyed = true;
  });
  // The first callback is still under way: the destructors wait for it.
  EXPECT_FALSE(wait_until([&] { return destroyed.load(); }, 1s));
  latch.set_value();
  destroying.join();
  const int seen = calls.load();
  EXPECT_GE(seen, 2);  // those posted before ran, before the destructor returned
  EXPECT_FALSE(wait_until([&] { return calls.load() > seen; }, 1s)) << "a callback ran after";
  EXPECT_EQ(0, after.load());
  admin_.command({"DEL", key("gate", "meta")});
}

}  // namespace
}  // namespace fairsem
