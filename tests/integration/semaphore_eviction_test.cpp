// SemaphoreTest, eviction and SemaphoreAdmin: evicting a holder or a (blocked or polling)
// waiter, a new request under an evicted id, bad ids, and the admin's view of the semaphore.

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/protocol/scripts.hpp"
#include "semaphore_fixture.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using detail::Connection;
using detail::Reply;
using test::redis_options;
using test::SemaphoreTest;
using test::wait_until;

// --- Eviction and SemaphoreAdmin ------------------------------------------------------------

// An evicted holder's permit passes on at once; the holder learns it from its next renewal.
TEST_F(SemaphoreTest, EvictingAHolderPassesItOnAndTellsTheHolder) {
  std::mutex mu;
  std::vector<std::string> reasons;
  // Long leases: the waiter polls only every 30 s and the holder's lease lasts 90 s, so a grant
  // within 20 s can only come from the eviction's wake-up. The holder renews every 200 ms.
  SemaphoreOptions o = options(1, 90s);
  o.renew_interval = 200ms;
  o.on_lost = [&](const std::string&, const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu);
    reasons.push_back(reason);
  };
  FairSemaphore sem(redis_options(), "evict-holder", o);
  FairSemaphore other(redis_options(), "evict-holder", options(1, 90s));
  Permit holder = sem.acquire();
  std::promise<long long> next_token;
  std::thread waiter([&] { next_token.set_value(other.acquire().fencing_token()); });
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  EXPECT_EQ(EvictResult::holder, sem.evict(holder.id()));
  auto granted = next_token.get_future();
  ASSERT_EQ(std::future_status::ready, granted.wait_for(20s));
  EXPECT_EQ(holder.fencing_token() + 1, granted.get());
  waiter.join();
  ASSERT_TRUE(wait_until([&] {
    std::lock_guard<std::mutex> lock(mu);
    return !reasons.empty();
  }));
  EXPECT_TRUE(holder.lost());
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(1u, reasons.size());
    EXPECT_NE(std::string::npos, reasons[0].find("evicted")) << reasons[0];
  }
  // Evicting again (as a retry after a lost reply would) is harmless and says so.
  EXPECT_EQ(EvictResult::already_evicted, sem.evict(holder.id()));
  EXPECT_EQ(ReleaseResult::expired, holder.release());
}

// A waiter blocked in acquire() is told at once, with the id it was queued under.
TEST_F(SemaphoreTest, EvictingABlockedWaiterEndsItsAcquireWithEvictedError) {
  // A 90 s lease: the waiter polls every 30 s, so only the eviction's wake-up ends it sooner.
  FairSemaphore sem(redis_options(), "evict-waiter", options(1, 90s));
  Permit holder = sem.acquire();
  std::promise<std::string> outcome;
  std::thread waiter([&] {
    try {
      Permit p = sem.acquire();
      outcome.set_value("granted " + p.id());
    } catch (const EvictedError& e) {
      outcome.set_value("evicted " + e.permit_id() + ": " + e.what());
    }
  });
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  const std::string id = sem.status().waiters.at(0).id;
  EXPECT_EQ(EvictResult::waiter, sem.evict(id));
  auto result = outcome.get_future();
  ASSERT_EQ(std::future_status::ready, result.wait_for(20s));
  const std::string text = result.get();
  EXPECT_EQ(0u, text.rfind("evicted " + id + ": ", 0)) << text;
  EXPECT_NE(std::string::npos, text.find("evict-waiter")) << text;
  waiter.join();
  const Status s = sem.status();
  EXPECT_EQ(1u, s.holders.size());
  EXPECT_TRUE(s.waiters.empty());
  // The marker came through the Client's inbox; the one in the waiter's own list stays for
  // a poll that might have missed it, and expires.
  EXPECT_EQ("evicted", admin_.command({"LINDEX", key("evict-waiter", "wake:" + id), "0"}).str);
  EXPECT_GT(integer({"PTTL", key("evict-waiter", "wake:" + id)}), 0);
  EXPECT_TRUE(holder.renew());  // the holder is untouched
}

// A waiter evicted between two polls (not blocked on its wake list at that moment) finds the
// marker when it polls with its ticket, instead of queueing again at the back.
TEST_F(SemaphoreTest, WaiterEvictedBetweenPollsIsNotQueuedAgain) {
  const std::string name = "evict-between-polls";
  FairSemaphore sem(redis_options(), name, options(1));
  Permit holder = sem.acquire();
  Connection raw(redis_options());
  const std::vector<std::string> key_names = script_keys(name);
  const detail::Args keys(key_names.begin(), key_names.end());
  const Reply queued = raw.eval(detail::scripts::semaphore_script("acquire"), keys,
                                {"acquire", "1", "10000", "w", "queue", "t"});
  ASSERT_EQ(2, queued.elements.at(0).integer);
  const std::string ticket = std::to_string(queued.elements.at(1).integer);
  EXPECT_EQ(EvictResult::waiter, sem.evict("w"));
  const Reply polled = raw.eval(detail::scripts::semaphore_script("acquire"), keys,
                                {"acquire", "1", "10000", "w", "queue", "t", ticket});
  EXPECT_EQ(3, polled.elements.at(0).integer);
  EXPECT_TRUE(sem.status().waiters.empty());
  EXPECT_EQ(0, integer({"EXISTS", key(name, "wake:w")}));  // the marker was consumed
  EXPECT_EQ(EvictResult::not_found, sem.evict("w"));
}

TEST_F(SemaphoreTest, ANewRequestUnderAnEvictedIdStartsClean) {
  const std::string name = "evict-reuse";
  SemaphoreOptions o = options(1);
  o.permit_id = "job-1";
  FairSemaphore sem(redis_options(), name, o);
  Permit first = sem.acquire();
  ASSERT_EQ(EvictResult::holder, sem.evict("job-1"));
  ASSERT_EQ(1, integer({"EXISTS", key(name, "wake:job-1")}));  // the marker, for the holder
  Permit second = sem.acquire();
  EXPECT_GT(second.fencing_token(), first.fencing_token());
  EXPECT_EQ(0, integer({"EXISTS", key(name, "wake:job-1")}));
  EXPECT_TRUE(second.renew());
  EXPECT_FALSE(first.renew());  // the old ticket stays gone
}

TEST_F(SemaphoreTest, EvictRejectsABadIdAndChangesNothing) {
  FairSemaphore sem(redis_options(), "evict-bad-id", options(1));
  Permit p = sem.acquire();
  const long long keys_before = integer({"DBSIZE"});
  for (const std::string& bad :
       std::vector<std::string>{"", "a b", "x{y}", std::string(201, 'x')}) {
    EXPECT_THROW((void)sem.evict(bad), InvalidArgument) << bad;
  }
  EXPECT_EQ(keys_before, integer({"DBSIZE"}));
  EXPECT_TRUE(p.renew());
}

// SemaphoreAdmin reads the limit Redis stores, and opening one writes nothing.
TEST_F(SemaphoreTest, AdminReadsAndEvictsWithoutKnowingTheLimit) {
  FairSemaphore sem(redis_options(), "admin-view", options(2));
  Permit a = sem.acquire();
  Permit b = sem.acquire();
  std::thread waiter([&] { EXPECT_THROW((void)sem.acquire(), EvictedError); });
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  SemaphoreOptions o;
  o.key_prefix = options(1).key_prefix;
  SemaphoreAdmin admin(redis_options(), "admin-view", o.key_prefix);
  Status s = admin.status();
  EXPECT_EQ(2, s.limit);
  ASSERT_EQ(2u, s.holders.size());
  EXPECT_EQ(a.id(), s.holders[0].id);
  ASSERT_EQ(1u, s.waiters.size());
  EXPECT_EQ(EvictResult::waiter, admin.evict(s.waiters[0].id));
  waiter.join();
  EXPECT_EQ(EvictResult::holder, admin.evict(b.id()));
  s = admin.status();
  EXPECT_EQ(1u, s.holders.size());
  EXPECT_TRUE(s.waiters.empty());

  const long long keys_before = integer({"DBSIZE"});
  SemaphoreAdmin nobody(redis_options(), "never-used", o.key_prefix);
  const Status empty = nobody.status();
  EXPECT_EQ(0, empty.limit);
  EXPECT_TRUE(empty.holders.empty());
  EXPECT_TRUE(empty.waiters.empty());
  EXPECT_EQ(EvictResult::not_found, nobody.evict("x"));
  EXPECT_EQ(keys_before, integer({"DBSIZE"}));
  EXPECT_THROW(SemaphoreAdmin(redis_options(), "bad name", o.key_prefix), InvalidArgument);
}

TEST_F(SemaphoreTest, AdminRefusesAStoredLimitThatIsNotANumber) {
  const std::string prefix = options(1).key_prefix;
  admin_.command({"HSET", key("garbled", "meta"), "limit", "lots"});
  SemaphoreAdmin admin(redis_options(), "garbled", prefix);
  try {
    (void)admin.status();
    FAIL() << "status() accepted a non-numeric stored limit";
  } catch (const ReplyError& e) {
    EXPECT_NE(std::string::npos, std::string(e.what()).find("not a number")) << e.what();
  }
}

}  // namespace
}  // namespace fairsem
