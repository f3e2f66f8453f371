// A waiter removed from the head of the queue lets in the waiters behind it that fit, with their
// wake-ups, whichever way it goes: its own leave (a deadline passed, ticket 0), an eviction, a
// resize that makes it too large, a reap of its expired entry. Limit 3, a holder of 2 units, the
// head asking for 2 and one behind it asking for 1: once the head is gone the one behind is
// granted by that same run, not at its next poll.

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "semaphore_fixture.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using detail::Args;
using detail::Connection;
using detail::Reply;
using test::wait_until;

class WaiterRemovalTest : public test::SemaphoreFixture {
 protected:
  /// A lease of 30 s: a waiter polls every 10 s, so a grant within a few seconds of the head's
  /// leaving came from a wake-up, not a poll.
  SemaphoreOptions long_lease() { return options(3, 30s); }

  /// The acquire's arguments after its name, limit and lease: a fresh id without a Client.
  static Args acquire_args(const std::string& id, const std::string& mode,
                           const std::string& units) {
    return {"acquire", id, mode, "host 1", "0", units, "", "0", "0", "1"};
  }

  /// Sets up `name` at the script level: h holds 2 of 3 units, w1 (the head) asks for
  /// `head_units`, w2 behind it for 1. Returns w1's ticket.
  long long queue_up(const std::string& name, const std::string& head_units = "2") {
    const Reply h = run_op(conn_, name, acquire_args("h", "try", "2"), "3", "60000");
    EXPECT_EQ(h.elements.at(0).integer, 1);
    const Reply w1 = run_op(conn_, name, acquire_args("w1", "queue", head_units), "3", "60000");
    EXPECT_EQ(w1.elements.at(0).integer, 2);
    const Reply w2 = run_op(conn_, name, acquire_args("w2", "queue", "1"), "3", "60000");
    EXPECT_EQ(w2.elements.at(0).integer, 2);
    return w1.elements.at(1).integer;
  }

  /// w2 holds the free unit (slot 2) and its wake list says so, with its ticket.
  void expect_w2_granted(const std::string& name, const std::string& way) {
    EXPECT_EQ(admin_.command({"HGET", key(name, "slots"), "w2"}).str, "2") << way;
    const std::string ticket = admin_.command({"ZSCORE", key(name, "owner"), "w2"}).str;
    const Reply list = admin_.command({"LRANGE", key(name, "wake:w2"), "0", "-1"});
    ASSERT_EQ(list.elements.size(), 1U) << way;
    EXPECT_EQ(list.elements[0].str, ticket + ":2") << way;
  }

  Client client_{test::redis_options()};
  Connection conn_{test::redis_options()};
};

TEST_F(WaiterRemovalTest, AHeadWaiterThatTimesOutLetsInTheOneBehindItAtOnce) {
  FairSemaphore sem(client_, "timeout", long_lease());
  Permit holder = sem.acquire(2);
  std::future<std::optional<Permit>> head = sem.try_acquire_for_async(2, 800ms);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  std::future<Permit> behind = sem.acquire_async(1);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 2; }));
  ASSERT_EQ(head.wait_for(30s), std::future_status::ready);
  EXPECT_FALSE(head.get().has_value());
  // Its next poll is some 9 s away.
  ASSERT_EQ(behind.wait_for(3s), std::future_status::ready) << "granted only by a poll";
  EXPECT_EQ(behind.get().slots(), std::vector<long long>{2});
}

TEST_F(WaiterRemovalTest, AnEvictedHeadWaiterLetsInTheOneBehindItAtOnce) {
  FairSemaphore sem(client_, "evict", long_lease());
  SemaphoreAdmin admin(client_, "evict", prefix_);
  Permit holder = sem.acquire(2);
  std::future<Permit> head = sem.acquire_async(2);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  std::future<Permit> behind = sem.acquire_async(1);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 2; }));
  EXPECT_EQ(admin.evict(sem.status().waiters.at(0).id), EvictResult::waiter);
  ASSERT_EQ(head.wait_for(30s), std::future_status::ready);
  EXPECT_THROW(head.get(), EvictedError);
  ASSERT_EQ(behind.wait_for(3s), std::future_status::ready) << "granted only by a poll";
  EXPECT_EQ(behind.get().slots(), std::vector<long long>{2});
}

TEST_F(WaiterRemovalTest, EveryWayAHeadWaiterGoesPromotesTheOnesBehindIt) {
  struct Way {
    std::string name;
    std::string head_units;
    std::function<void(const std::string& name, long long head_ticket)> remove;
  };
  const std::vector<Way> ways{
      {"leaving", "2",
       [&](const std::string& name, long long ticket) {
         const Reply r =
             run_op(conn_, name, {"release", "w1", std::to_string(ticket), "60000", "leaving"}, "3",
                    "60000");
         EXPECT_EQ(r.elements.at(0).integer, 2);
       }},
      {"ticket-0", "2",
       [&](const std::string& name, long long) {
         const Reply r = run_op(conn_, name, {"release", "w1", "0", "60000"}, "3", "60000");
         EXPECT_EQ(r.elements.at(0).integer, 2);
       }},
      {"evict", "2",
       [&](const std::string& name, long long) {
         EXPECT_EQ(run_op(conn_, name, {"evict", "w1"}, "0", "60000").elements.at(0).integer, 2);
       }},
      // Limit 4: the head asks for all 4; the shrink to 3 removes it as too large.
      {"resize", "4",
       [&](const std::string& name, long long) {
         const Reply r = run_op(conn_, name, {"resize", "3"}, "0", "60000");
         EXPECT_EQ(r.elements.at(2).integer, 1);
       }},
      // Its deadline passed: the next run that reaps (a status) removes it.
      {"reap", "2",
       [&](const std::string& name, long long) {
         admin_.command({"ZADD", key(name, "time"), "1", "w1"});
         (void)run_op(conn_, name, {"status"}, "0", "60000");
       }},
  };
  for (const Way& way : ways) {
    const std::string name = "way-" + way.name;
    if (way.name == "resize") (void)run_op(conn_, name, {"open"}, "4", "60000");
    const long long ticket = queue_up(name, way.head_units);
    way.remove(name, ticket);
    expect_w2_granted(name, way.name);
  }
}

}  // namespace
}  // namespace fairsem
