// A semaphore whose keys expired (SemaphoreOptions::idle_expiry) stays gone until someone
// acquires or opens it: status, evict, a release or renewal of a lost permit and a waiter's leave
// bring back no key (before, meta came back without a TTL, for good); a resize by its handle
// stores the limit with the expiry. Fencing tokens of the life after an expiry exceed every
// earlier one whoever starts it, and the keys a handle that followed the stored expiry makes
// again expire again.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "key_expiry.hpp"
#include "semaphore_fixture.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using detail::Args;
using detail::Connection;
using detail::Reply;
using test::keys_without_expiry;
using test::wait_until;

class ExpiredSemaphoreTest : public test::SemaphoreFixture {
 protected:
  SemaphoreOptions expiring(long long limit) {
    SemaphoreOptions o = options(limit, 1s);
    o.idle_expiry = 1s;
    return o;
  }
  /// Every key of semaphore `name`, wake lists and receipts included.
  std::vector<std::string> all_keys(const std::string& name) {
    std::vector<std::string> out;
    for (const auto& k : admin_.command({"KEYS", prefix_ + ":{" + name + "}:*"}).elements) {
      out.push_back(k.str);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  /// The semaphore's own keys of `name` (not the release receipts, kept for the client's retry
  /// budget, nor wake lists) that exist.
  std::vector<std::string> own_keys(const std::string& name) {
    std::vector<std::string> out;
    for (const std::string& k : all_keys(name)) {
      if (k.find(":receipts:") == std::string::npos && k.find(":wake:") == std::string::npos) {
        out.push_back(k);
      }
    }
    return out;
  }
  /// Waits until no key of `name` is left but receipts and wake lists.
  ::testing::AssertionResult gone(const std::string& name) {
    if (wait_until([&] { return own_keys(name).empty(); }, 30s)) {
      return ::testing::AssertionSuccess();
    }
    ::testing::AssertionResult failure = ::testing::AssertionFailure();
    for (const std::string& k : all_keys(name)) {
      failure << k << " (PTTL " << admin_.command({"PTTL", k}).integer << ") ";
    }
    return failure;
  }

  Client client_{test::redis_options()};
  Connection conn_{test::redis_options()};
};

TEST_F(ExpiredSemaphoreTest, ReadingOrLeavingAnExpiredSemaphoreBringsBackNoKey) {
  SemaphoreOptions o = expiring(3);
  o.auto_renew = false;  // the permits are lost with the keys
  FairSemaphore sem(client_, "idle", o);
  SemaphoreAdmin admin(client_, "idle", prefix_);
  std::optional<Permit> renewed = sem.acquire();
  std::optional<Permit> released = sem.acquire(2);
  ASSERT_TRUE(gone("idle"));
  EXPECT_EQ(sem.status().holders.size(), 0U);
  EXPECT_EQ(admin.status().holders.size(), 0U);
  EXPECT_EQ(admin.evict(renewed->id()), EvictResult::not_found);
  EXPECT_FALSE(renewed->renew());
  EXPECT_EQ(released->release(), ReleaseResult::expired);
  EXPECT_EQ(all_keys("idle"), std::vector<std::string>{});

  // The same at the script level, with the arguments every client passes: a waiter's leave
  // (with its ticket, and with ticket 0), a partial release, a renewal, each status and evict.
  const std::vector<Args> operations{
      {"status"},
      {"evict", "w"},
      {"release", "w", "5", "60000", "leaving"},
      {"release", "w", "0", "60000"},
      {"release", "h", "5", "60000", "keep", "1"},
      {"renew", "h", "5", "w", "6"},
  };
  for (const Args& op : operations) {
    for (const std::string limit : {"3", "0"}) {
      if (limit == "0" && (op[0] == "release" || op[0] == "renew")) continue;
      (void)run_op(conn_, "idle", op, limit, "1000");
      EXPECT_EQ(all_keys("idle"), std::vector<std::string>{}) << op[0] << " limit " << limit;
    }
  }
}

TEST_F(ExpiredSemaphoreTest, AResizeOfAnExpiredSemaphoreByItsHandleExpiresAgain) {
  FairSemaphore sem(client_, "resized", expiring(2));
  sem.acquire().release();
  ASSERT_TRUE(gone("resized"));
  EXPECT_EQ(sem.resize(4).new_limit, 4);
  EXPECT_EQ(admin_.command({"HGET", key("resized", "meta"), "limit"}).str, "4");
  EXPECT_EQ(keys_without_expiry(admin_, prefix_ + ":{resized}:*"), std::vector<std::string>{});
  EXPECT_TRUE(gone("resized"));
}

TEST_F(ExpiredSemaphoreTest, AHandleThatFollowedTheStoredExpiryStartsANewLifeAboveItAndExpiring) {
  long long newest = 0;
  {
    FairSemaphore first(client_, "follow", expiring(2));
    for (int i = 0; i < 3; ++i) newest = std::max(newest, first.acquire().fencing_token());
  }
  // Opened while the expiry is stored: it follows it.
  FairSemaphore follower(client_, "follow", options(2, 1s));
  ASSERT_TRUE(gone("follow"));
  Permit p = follower.acquire();
  EXPECT_GT(p.fencing_token(), newest);
  EXPECT_GT(follower.acquire().fencing_token(), p.fencing_token());
  EXPECT_EQ(keys_without_expiry(admin_, prefix_ + ":{follow}:*"), std::vector<std::string>{});
  p.release();
  EXPECT_TRUE(gone("follow")) << "the keys it made again never expire";
}

TEST_F(ExpiredSemaphoreTest, ANewCounterStartsAboveEveryEarlierTokenWhoeverMakesIt) {
  // Opened before anyone stored an expiry, this handle knows of none.
  FairSemaphore unaware(client_, "unaware", options(2, 1s));
  long long newest = 0;
  {
    FairSemaphore expiring_one(client_, "unaware", expiring(2));
    for (int i = 0; i < 3; ++i) {
      newest = std::max(newest, expiring_one.acquire().fencing_token());
    }
  }
  ASSERT_TRUE(gone("unaware"));
  EXPECT_GT(unaware.acquire().fencing_token(), newest);
}

}  // namespace
}  // namespace fairsem
