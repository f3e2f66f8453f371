// Tenants at the script level (src/lua/semaphore/tenants.lua), where the seams are: a waiter
// leaving in the instant of its promotion under the ticket it waited with, an evicted or reaped
// head handing its tenant's turn on, and every key of data model 3 expiring with the others.

#include <gtest/gtest.h>

#include <chrono>
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

class TenantScriptTest : public test::SemaphoreFixture {
 protected:
  TenantScriptTest() : conn_(test::redis_options()) {}

  /// acquire ID queue for `tenant` on `name`, limit `limit`: {state, ticket, ...}.
  Reply queue(const std::string& name, const std::string& id, const std::string& tenant,
              const std::string& limit = "1", const std::string& lease = "60000") {
    return run_op(conn_, name, {"acquire", id, "queue", "o", "0", "1", "", "0", "0", "0", tenant},
                  limit, lease);
  }
  Reply op(const std::string& name, Args args, const std::string& limit = "1") {
    return run_op(conn_, name, std::move(args), limit, "60000");
  }
  std::string ticket_of(const std::string& name, const std::string& id) {
    return admin_.command({"ZSCORE", key(name, "owner"), id}).str;
  }
  bool holds(const std::string& name, const std::string& id) {
    return admin_.command({"HEXISTS", key(name, "slots"), id}).integer == 1;
  }

  Connection conn_;
};

// W waits under ticket T; H's release promotes it under a new ticket. W's leave, sent with T
// (it had not heard of the promotion), frees the permit, which passes on to the next waiter.
TEST_F(TenantScriptTest, AWaiterLeavingAsItIsPromotedFreesThePermitItWasGiven) {
  ASSERT_EQ(1, queue("leave", "h", "a").elements[0].integer);
  const Reply w = queue("leave", "w", "b");
  ASSERT_EQ(2, w.elements[0].integer);
  ASSERT_EQ(2, queue("leave", "x", "a").elements[0].integer);
  const std::string waited = std::to_string(w.elements[1].integer);
  ASSERT_EQ(1, op("leave", {"release", "h", ticket_of("leave", "h"), "60000"}).elements[0].integer);
  ASSERT_TRUE(holds("leave", "w"));
  EXPECT_GT(std::stoll(ticket_of("leave", "w")), std::stoll(waited)) << "a new ticket";
  const Reply left = op("leave", {"release", "w", waited, "60000", "leaving"});
  EXPECT_EQ(1, left.elements[0].integer) << "released as the holder it had become";
  EXPECT_TRUE(holds("leave", "x")) << "the permit passed on";
}

// A tenant's evicted head, and its reaped head, hand the turn to the next in line; the tenants'
// index follows (nobody is promoted from a queue that no longer has them).
TEST_F(TenantScriptTest, AnEvictedOrReapedHeadHandsItsTenantsTurnOn) {
  ASSERT_EQ(1, queue("turn", "h", "a").elements[0].integer);
  ASSERT_EQ(2, queue("turn", "b1", "b").elements[0].integer);
  ASSERT_EQ(2, queue("turn", "b2", "b", "1", "300").elements[0].integer);  // expires soon
  ASSERT_EQ(2, queue("turn", "b3", "b").elements[0].integer);
  ASSERT_EQ(2, op("turn", {"evict", "b1"}).elements[0].integer);
  EXPECT_EQ(2, admin_.command({"ZCARD", key("turn", "owner:queue:b")}).integer);
  const std::string head =
      admin_.command({"ZRANGE", key("turn", "owner:tenants"), "0", "0"}).elements.at(0).str;
  EXPECT_EQ(":b", head.substr(16)) << head;
  EXPECT_EQ(ticket_of("turn", "b2"), std::to_string(std::stoll(head.substr(0, 16))));
  // b2's lease runs out; the reap of the next status takes it out of its tenant's queue.
  const long long b2_deadline =
      std::stoll(admin_.command({"ZSCORE", key("turn", "time"), "b2"}).str);
  ASSERT_TRUE(test::wait_until([&] { return server_ms() > b2_deadline; }));
  (void)op("turn", {"status"});
  EXPECT_EQ(1, admin_.command({"ZCARD", key("turn", "owner:queue:b")}).integer);
  ASSERT_EQ(1, op("turn", {"release", "h", ticket_of("turn", "h"), "60000"}).elements[0].integer);
  EXPECT_TRUE(holds("turn", "b3"));
  EXPECT_EQ(0, admin_.command({"EXISTS", key("turn", "owner:tenants")}).integer);
}

// With an idle expiry, the keys of data model 3 expire with the others.
TEST_F(TenantScriptTest, EveryKeyOfDataModelThreeExpiresWithTheOthers) {
  const auto acquire = [&](const std::string& id, const std::string& tenant) {
    return run_op(conn_, "expiring",
                  {"acquire", id, "queue", "o", "0", "1", "", "0", "60000", "0", tenant}, "1",
                  "10000");
  };
  ASSERT_EQ(1, acquire("h", "a").elements[0].integer);
  ASSERT_EQ(2, acquire("w", "b").elements[0].integer);
  ASSERT_EQ(1, op("expiring", {"tenant", "b", "3"}).elements[0].integer);
  ASSERT_EQ(
      1, op("expiring", {"release", "h", ticket_of("expiring", "h"), "10000"}).elements[0].integer);
  const long long meta_ttl = admin_.command({"PTTL", key("expiring", "meta")}).integer;
  ASSERT_GT(meta_ttl, 0);
  for (const char* suffix : {"owner", "meta:weights", "owner:idle"}) {
    const long long ttl = admin_.command({"PTTL", key("expiring", suffix)}).integer;
    EXPECT_GT(ttl, 0) << suffix;
    EXPECT_LE(ttl, meta_ttl) << suffix;
  }
  ASSERT_EQ(2, acquire("v", "c").elements[0].integer);  // a queue and the tenants' index again
  for (const char* suffix : {"owner:queue:c", "owner:tenants"}) {
    EXPECT_GT(admin_.command({"PTTL", key("expiring", suffix)}).integer, 0) << suffix;
  }
}

}  // namespace
}  // namespace fairsem
