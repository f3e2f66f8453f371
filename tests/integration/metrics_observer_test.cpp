// MetricsObserver: what a Client's (or one semaphore's) observer is told, event by event: the
// limit on open and resize; each acquire's start and end with its result (granted, refused,
// timed out, cancelled, error, and a full queue as refused); each permit's grant and its one
// end, released or lost, with its units and hold time; partial releases; failed renewals. An
// observer that throws changes nothing for the caller, and a semaphore's own observer takes
// the place of the Client's.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
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
using test::wait_until;

/// Every event, as one line: "ended granted 2", "permit_ended 2 released"...
class RecordingObserver : public MetricsObserver {
 public:
  void limit_set(const std::string& s, long long limit) override {
    add(s, "limit " + std::to_string(limit));
  }
  void acquire_started(const std::string& s, long long units) override {
    add(s, "started " + std::to_string(units));
  }
  void acquire_ended(const std::string& s, AcquireResult result, long long units,
                     std::chrono::nanoseconds waited) override {
    static const std::map<AcquireResult, std::string> names = {
        {AcquireResult::granted, "granted"},
        {AcquireResult::timed_out, "timed_out"},
        {AcquireResult::cancelled, "cancelled"},
        {AcquireResult::refused, "refused"},
        {AcquireResult::error, "error"}};
    EXPECT_GE(waited.count(), 0);
    add(s, "ended " + names.at(result) + " " + std::to_string(units));
  }
  void permit_granted(const std::string& s, long long units) override {
    add(s, "granted " + std::to_string(units));
  }
  void units_released(const std::string& s, long long units) override {
    add(s, "units_released " + std::to_string(units));
  }
  void permit_ended(const std::string& s, long long units, std::chrono::nanoseconds held,
                    bool lost) override {
    EXPECT_GT(held.count(), 0);
    add(s, "permit_ended " + std::to_string(units) + (lost ? " lost" : " released"));
  }
  void permit_lost_at_release(const std::string& s) override { add(s, "permit_lost_at_release"); }
  void renewal_failed(const std::string& s) override { add(s, "renewal_failed"); }
  void call_batched(const std::string& s) override { add(s, "call_batched"); }

  std::vector<std::string> take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(events_, {});
  }
  std::size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_.size();
  }

 private:
  void add(const std::string& semaphore, const std::string& event) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(semaphore + ": " + event);
  }
  std::mutex mu_;
  std::vector<std::string> events_;
};

using Events = std::vector<std::string>;

class MetricsObserverTest : public test::SemaphoreFixture {
 protected:
  Client client_with(std::shared_ptr<MetricsObserver> observer) const {
    ClientOptions o;
    o.metrics_observer = std::move(observer);
    return Client(test::redis_options(), o);
  }

  const std::shared_ptr<RecordingObserver> observer_ = std::make_shared<RecordingObserver>();
  Client client_ = client_with(observer_);
};

TEST_F(MetricsObserverTest, TellsEachAcquireAndEachPermitFromGrantToRelease) {
  FairSemaphore sem(client_, "s", options(3));
  EXPECT_EQ((Events{"s: limit 3"}), observer_->take());

  Permit two = sem.acquire(2);
  EXPECT_EQ((Events{"s: started 2", "s: granted 2", "s: ended granted 2"}), observer_->take());
  EXPECT_FALSE(sem.try_acquire(2).has_value());
  EXPECT_EQ((Events{"s: started 2", "s: ended refused 2"}), observer_->take());
  EXPECT_FALSE(sem.try_acquire_for(2, 20ms).has_value());
  EXPECT_EQ((Events{"s: started 2", "s: ended timed_out 2"}), observer_->take());

  EXPECT_EQ(ReleaseResult::released, two.release(1));  // a partial release
  EXPECT_EQ((Events{"s: units_released 1"}), observer_->take());
  EXPECT_EQ(ReleaseResult::released, two.release());
  EXPECT_EQ((Events{"s: permit_ended 1 released"}), observer_->take());
  EXPECT_EQ(ReleaseResult::already_released, two.release());
  EXPECT_TRUE(observer_->take().empty());  // one end per permit

  EXPECT_EQ(5, sem.resize(5).new_limit);
  EXPECT_EQ((Events{"s: limit 5"}), observer_->take());
}

TEST_F(MetricsObserverTest, TellsCancelledAndFullQueueRequestsAndALostPermit) {
  SemaphoreOptions bounded = options(1);
  bounded.max_waiters = 1;
  FairSemaphore sem(client_, "s", bounded);
  Permit holder = sem.acquire();
  std::promise<std::exception_ptr> cancelled;
  AcquireRequest request = sem.acquire_async(
      [&](std::exception_ptr error, std::optional<Permit>) { cancelled.set_value(error); });
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  observer_->take();
  // Behind one waiter with max_waiters 1: refused.
  EXPECT_THROW((void)sem.acquire(), QueueFullError);
  EXPECT_EQ((Events{"s: started 1", "s: ended refused 1"}), observer_->take());
  // Metrics count it as the observer is told it: a refusal, not an error.
  EXPECT_EQ(1u, sem.metrics().rejections);
  EXPECT_EQ(0u, sem.metrics().errors);
  ASSERT_TRUE(request.cancel());
  EXPECT_NE(nullptr, cancelled.get_future().get());
  EXPECT_EQ((Events{"s: ended cancelled 1"}), observer_->take());

  // Evicted: its next renewal finds it gone.
  ASSERT_EQ(EvictResult::holder, sem.evict(holder.id()));
  EXPECT_FALSE(holder.renew());
  EXPECT_TRUE(holder.lost());
  EXPECT_EQ((Events{"s: permit_ended 1 lost"}), observer_->take());
  EXPECT_EQ(ReleaseResult::expired, holder.release());
  EXPECT_TRUE(observer_->take().empty());
}

// Every request started ends in exactly one of Metrics' outcomes, so the documented identity
// holds after a mix of them, cancels included (they were counted in no outcome before).
TEST_F(MetricsObserverTest, MetricsOutcomesAddUpToTheAttemptsWithCancelsAmongThem) {
  SemaphoreOptions bounded = options(1, 60s);
  bounded.max_waiters = 2;
  FairSemaphore sem(client_, "identity", bounded);
  std::optional<Permit> holder = sem.try_acquire();  // granted
  ASSERT_TRUE(holder);
  EXPECT_FALSE(sem.try_acquire());          // rejected
  EXPECT_FALSE(sem.try_acquire_for(50ms));  // timed out
  std::promise<std::exception_ptr> first;
  std::promise<std::exception_ptr> second;
  AcquireRequest a = sem.acquire_async(
      [&](std::exception_ptr error, std::optional<Permit>) { first.set_value(error); });
  AcquireRequest b = sem.acquire_async(
      [&](std::exception_ptr error, std::optional<Permit>) { second.set_value(error); });
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 2; }));
  EXPECT_THROW((void)sem.acquire(), QueueFullError);  // rejected too
  ASSERT_TRUE(a.cancel());
  EXPECT_NE(nullptr, first.get_future().get());                               // cancelled
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));  // a has left
  const auto waiters = sem.status().waiters;
  ASSERT_EQ(1u, waiters.size());
  EXPECT_EQ(EvictResult::waiter, sem.evict(waiters.at(0).id));
  EXPECT_NE(nullptr, second.get_future().get());  // evicted
  // A cancel of a request about to be granted: cancelled all the same.
  holder.reset();
  std::promise<void> third;
  AcquireRequest c =
      sem.acquire_async([&](std::exception_ptr, std::optional<Permit>) { third.set_value(); });
  (void)c.cancel();
  third.get_future().get();
  auto granted = sem.try_acquire_for_async(10s);  // granted, asynchronously
  ASSERT_TRUE(granted.get());

  const Metrics m = sem.metrics();
  EXPECT_EQ(8u, m.acquire_attempts);
  EXPECT_EQ(2u, m.rejections);
  EXPECT_EQ(1u, m.timeouts);
  EXPECT_EQ(1u, m.evictions_seen);
  EXPECT_EQ(0u, m.errors);
  EXPECT_EQ(m.grants + m.cancellations, 4u) << "c was granted or cancelled, once";
  EXPECT_GE(m.cancellations, 1u);
  EXPECT_EQ(m.acquire_attempts,
            m.grants + m.rejections + m.timeouts + m.evictions_seen + m.errors + m.cancellations);
}

// A release is told before it is sent: the units it gives back may be granted to another thread
// of the process at once, whose grant must not be counted while the release is not.
TEST_F(MetricsObserverTest, TellsAReleaseBeforeItIsSentSoUnitsHeldNeverShowMoreThanHeld) {
  class HeldOnServer : public MetricsObserver {
   public:
    explicit HeldOnServer(std::string prefix) : prefix_(std::move(prefix)) {}
    void units_released(const std::string& s, long long) override { seen.push_back(held(s)); }
    void permit_ended(const std::string& s, long long, std::chrono::nanoseconds, bool) override {
      seen.push_back(held(s));
    }
    std::vector<long long> seen;  // the units the server counts as held when each was told

   private:
    long long held(const std::string& s) {
      long long units = 0;
      for (const PermitInfo& p :
           SemaphoreAdmin(test::redis_options(), s, prefix_).status().holders) {
        units += p.count;
      }
      return units;
    }
    const std::string prefix_;
  };
  auto observer = std::make_shared<HeldOnServer>(prefix_);
  FairSemaphore sem(client_with(observer), "s", options(3));
  Permit three = sem.acquire(3);
  EXPECT_EQ(ReleaseResult::released, three.release(1));
  EXPECT_EQ(ReleaseResult::released, three.release());
  // Each told while the server still counted the units as held.
  EXPECT_EQ((std::vector<long long>{3, 2}), observer->seen);
}

TEST_F(MetricsObserverTest, AReleaseThatFindsThePermitGoneTellsItLost) {
  SemaphoreOptions o = options(1);
  o.auto_renew = false;
  FairSemaphore sem(client_, "s", o);
  Permit holder = sem.acquire();
  ASSERT_EQ(EvictResult::holder, sem.evict(holder.id()));
  observer_->take();
  EXPECT_EQ(ReleaseResult::expired, holder.release());
  EXPECT_EQ((Events{"s: permit_ended 1 released", "s: permit_lost_at_release"}), observer_->take());
  EXPECT_EQ(1u, sem.metrics().permits_lost);
}

TEST_F(MetricsObserverTest, ASemaphoresOwnObserverTakesThePlaceOfTheClients) {
  auto own = std::make_shared<RecordingObserver>();
  SemaphoreOptions o = options(1);
  o.metrics_observer = own;
  FairSemaphore sem(client_, "own", o);
  sem.acquire().release();
  EXPECT_EQ((Events{"own: limit 1", "own: started 1", "own: granted 1", "own: ended granted 1",
                    "own: permit_ended 1 released"}),
            own->take());
  EXPECT_TRUE(observer_->take().empty());
}

TEST_F(MetricsObserverTest, TellsEachCallThatWentInABatch) {
  ClientOptions o;
  o.metrics_observer = observer_;
  o.batch_calls = true;
  Client batching(test::redis_options(), o);
  FairSemaphore sem(batching, "b", options(2));
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 30; ++i) EXPECT_EQ(ReleaseResult::released, sem.acquire().release());
    });
  }
  for (std::thread& t : threads) t.join();
  const Events events = observer_->take();
  const auto told = std::count(events.begin(), events.end(), "b: call_batched");
  // Eight threads calling at once: some calls went in batches, each told once.
  EXPECT_GT(told, 0);
  EXPECT_EQ(static_cast<std::uint64_t>(told), sem.metrics().batched_calls);
}

TEST_F(MetricsObserverTest, AnObserverThatThrowsChangesNothingForTheCaller) {
  class Throwing : public MetricsObserver {
   public:
    void acquire_started(const std::string&, long long) override {
      throw std::runtime_error("observer");
    }
    void permit_ended(const std::string&, long long, std::chrono::nanoseconds, bool) override {
      throw std::runtime_error("observer");
    }
  };
  Client client = client_with(std::make_shared<Throwing>());
  FairSemaphore sem(client, "s", options(1));
  Permit p = sem.acquire();
  EXPECT_EQ(ReleaseResult::released, p.release());
  EXPECT_EQ(1u, sem.metrics().grants);
}

}  // namespace
}  // namespace fairsem
