#include <gtest/gtest.h>

#include <fairsem/impl/net/router.hpp>

#include <string>
#include <vector>

#include "fairsem/errors.hpp"

namespace {

using fairsem::NodeAddress;
using fairsem::detail::kClusterSlots;
using fairsem::detail::key_slot;
using fairsem::detail::parse_redirect;
using fairsem::detail::Redirect;
using fairsem::detail::Router;
using fairsem::detail::SlotRange;

TEST(KeySlotTest, IsCrc16XmodemModulo16384) {
  // The CRC16/XMODEM check value of "123456789" is 0x31C3 (12739, below 16384).
  EXPECT_EQ(key_slot("123456789"), 0x31C3);
  EXPECT_EQ(key_slot("foo"), 12182);
  EXPECT_EQ(key_slot(""), 0);
}

TEST(KeySlotTest, HashesOnlyTheFirstNonEmptyHashTag) {
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("user1000"));
  EXPECT_EQ(key_slot("fairsem:{jobs}:owner"), key_slot("jobs"));
  EXPECT_EQ(key_slot("fairsem:{jobs}:wake:abc"), key_slot("fairsem:{jobs}:time"));
  EXPECT_EQ(key_slot("foo{bar}{zap}"), key_slot("bar"));
  // An empty tag "{}" does not count: the whole key is hashed.
  EXPECT_EQ(key_slot("foo{}{bar}"), key_slot(std::string("foo{}{bar}")));
  EXPECT_NE(key_slot("foo{}{bar}"), key_slot("bar"));
  // The tag ends at the first '}' after the first '{'.
  EXPECT_EQ(key_slot("foo{{bar}}zap"), key_slot("{bar"));
  EXPECT_EQ(key_slot("no{tag"), key_slot(std::string("no{tag")));
}

TEST(RedirectTest, ParsesMovedAndAsk) {
  const NodeAddress from{"10.0.0.1", 7000};
  auto moved = parse_redirect("MOVED 3999 127.0.0.1:6381", from);
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->kind, Redirect::Kind::moved);
  EXPECT_EQ(moved->slot, 3999);
  EXPECT_EQ(moved->node, (NodeAddress{"127.0.0.1", 6381}));

  auto ask = parse_redirect("ASK 0 [::1]:7001", from);
  ASSERT_TRUE(ask);
  EXPECT_EQ(ask->kind, Redirect::Kind::ask);
  EXPECT_EQ(ask->slot, 0);
  EXPECT_EQ(ask->node, (NodeAddress{"::1", 7001}));

  // An empty host means the node that sent the redirection.
  auto same = parse_redirect("MOVED 16383 :7002", from);
  ASSERT_TRUE(same);
  EXPECT_EQ(same->node, (NodeAddress{"10.0.0.1", 7002}));
}

TEST(RedirectTest, AnythingElseIsNotARedirection) {
  const NodeAddress from{"h", 1};
  for (const char* error : {"ERR unknown command", "MOVED", "MOVED 16384 h:1", "MOVED x h:1",
                            "MOVED 1 h", "MOVED 1 h:0", "MOVED 1 h:70000", "ASK 1 h:x",
                            "TRYAGAIN Multiple keys request during rehashing of slot",
                            "READONLY You can't write against a read only replica."}) {
    EXPECT_FALSE(parse_redirect(error, from)) << error;
  }
}

// The slot map, without a server: what Discovery and the connections rely on.

const NodeAddress kSeedA{"seed-a", 7000};
const NodeAddress kSeedB{"seed-b", 7001};
const NodeAddress kMaster1{"10.0.0.1", 7000};
const NodeAddress kMaster2{"10.0.0.2", 7000};
const NodeAddress kMaster3{"10.0.0.3", 7000};

TEST(RouterTest, AnEmptyMapKnowsNoSlotButOffersItsFirstSeedForKeylessCommands) {
  const Router router({kSeedA, kSeedB});
  for (const int slot : {0, 1, 5000, kClusterSlots - 1}) EXPECT_FALSE(router.lookup(slot)) << slot;
  EXPECT_EQ(router.lookup(-1), kSeedA);
  EXPECT_EQ(router.nodes(), (std::vector<NodeAddress>{kSeedA, kSeedB}));
}

TEST(RouterTest, WithoutSeedsNothingIsKnownAtAll) {
  const Router router;  // Sentinel: the master is only what a sentinel names
  EXPECT_FALSE(router.lookup(-1));
  EXPECT_FALSE(router.lookup(0));
  EXPECT_TRUE(router.nodes().empty());
}

TEST(RouterTest, DuplicateSeedsCountOnce) {
  const Router router({kSeedA, kSeedB, kSeedA});
  EXPECT_EQ(router.nodes(), (std::vector<NodeAddress>{kSeedA, kSeedB}));
}

TEST(RouterTest, LooksUpEachSlotInItsRangeUpToBothEnds) {
  Router router({kSeedA});
  router.replace({SlotRange{0, 5460, kMaster1}, SlotRange{5461, 10922, kMaster2},
                  SlotRange{10923, kClusterSlots - 1, kMaster3}});
  EXPECT_EQ(router.lookup(0), kMaster1);
  EXPECT_EQ(router.lookup(5460), kMaster1);
  EXPECT_EQ(router.lookup(5461), kMaster2);
  EXPECT_EQ(router.lookup(10922), kMaster2);
  EXPECT_EQ(router.lookup(10923), kMaster3);
  EXPECT_EQ(router.lookup(kClusterSlots - 1), kMaster3);
  // A slot outside the cluster's is never served.
  EXPECT_FALSE(router.lookup(kClusterSlots));
  // Keyless commands go to the node of the lowest slot known, not to a seed.
  EXPECT_EQ(router.lookup(-1), kMaster1);
  // The seeds stay first among the nodes worth asking for the next map.
  EXPECT_EQ(router.nodes(), (std::vector<NodeAddress>{kSeedA, kMaster1, kMaster2, kMaster3}));
}

TEST(RouterTest, MastersAreTheNodesServingSlotsEachOnceInSlotOrder) {
  Router router({kSeedA, kSeedB});
  EXPECT_TRUE(router.masters().empty());  // seeds serve nothing until a map says so
  router.replace({SlotRange{0, 99, kMaster2}, SlotRange{100, 199, kMaster1},
                  SlotRange{200, 299, kMaster2}, SlotRange{300, kClusterSlots - 1, kMaster3}});
  EXPECT_EQ(router.masters(), (std::vector<NodeAddress>{kMaster2, kMaster1, kMaster3}));
  router.moved(100, kMaster3);  // kMaster1 still serves 101..199
  EXPECT_EQ(router.masters(), (std::vector<NodeAddress>{kMaster2, kMaster3, kMaster1}));
  router.forget();
  EXPECT_TRUE(router.masters().empty());
}

TEST(RouterTest, SlotsOutsideEveryRangeStayUnknown) {
  Router router({kSeedA});
  router.replace({SlotRange{100, 199, kMaster1}, SlotRange{300, 300, kMaster2}});
  EXPECT_FALSE(router.lookup(99));
  EXPECT_EQ(router.lookup(100), kMaster1);
  EXPECT_EQ(router.lookup(199), kMaster1);
  EXPECT_FALSE(router.lookup(200));
  EXPECT_FALSE(router.lookup(299));
  EXPECT_EQ(router.lookup(300), kMaster2);
  EXPECT_FALSE(router.lookup(301));
  EXPECT_EQ(router.lookup(-1), kMaster1);
}

TEST(RouterTest, MovedChangesThatSlotOnly) {
  Router router({kSeedA});
  router.replace({SlotRange{0, kClusterSlots - 1, kMaster1}});
  router.moved(42, kMaster2);
  EXPECT_EQ(router.lookup(42), kMaster2);
  EXPECT_EQ(router.lookup(41), kMaster1);
  EXPECT_EQ(router.lookup(43), kMaster1);
  // A node first heard of in a MOVED is worth asking for the next map.
  EXPECT_EQ(router.nodes(), (std::vector<NodeAddress>{kSeedA, kMaster1, kMaster2}));
  // A MOVED to a node already known adds none.
  router.moved(43, kMaster2);
  EXPECT_EQ(router.lookup(43), kMaster2);
  EXPECT_EQ(router.nodes().size(), 3U);
}

TEST(RouterTest, MovedFillsAnUnknownSlotOfAnEmptyMap) {
  Router router({kSeedA});
  router.moved(kClusterSlots - 1, kMaster1);
  EXPECT_EQ(router.lookup(kClusterSlots - 1), kMaster1);
  EXPECT_FALSE(router.lookup(0));
  EXPECT_EQ(router.lookup(-1), kMaster1);
}

TEST(RouterTest, MovedOutsideTheSlotsIsIgnored) {
  Router router({kSeedA});
  router.moved(-1, kMaster1);
  router.moved(kClusterSlots, kMaster1);
  EXPECT_EQ(router.lookup(-1), kSeedA);
  EXPECT_EQ(router.nodes(), (std::vector<NodeAddress>{kSeedA}));
}

TEST(RouterTest, ReplaceOnRediscoveryDropsTheOldMapAndItsNodes) {
  Router router({kSeedA, kSeedB});
  router.replace({SlotRange{0, 8191, kMaster1}, SlotRange{8192, kClusterSlots - 1, kMaster2}});
  router.moved(7, kMaster3);
  // After a failover the new map names other masters and leaves a slot unserved.
  router.replace({SlotRange{0, 8191, kMaster2}, SlotRange{8193, kClusterSlots - 1, kMaster2}});
  EXPECT_EQ(router.lookup(0), kMaster2);
  EXPECT_EQ(router.lookup(7), kMaster2);  // the earlier MOVED does not survive a new map
  EXPECT_EQ(router.lookup(8191), kMaster2);
  EXPECT_FALSE(router.lookup(8192));
  EXPECT_EQ(router.lookup(8193), kMaster2);
  // Nodes only the old map or a MOVED named are not asked again; the seeds always are.
  EXPECT_EQ(router.nodes(), (std::vector<NodeAddress>{kSeedA, kSeedB, kMaster2}));
}

TEST(RouterTest, ReplaceWithNoRangesEmptiesTheMap) {
  Router router({kSeedA});
  router.replace({SlotRange{0, kClusterSlots - 1, kMaster1}});
  router.replace({});
  EXPECT_FALSE(router.lookup(0));
  EXPECT_EQ(router.lookup(-1), kSeedA);
  EXPECT_EQ(router.nodes(), (std::vector<NodeAddress>{kSeedA}));
}

TEST(RouterTest, ABadRangeIsRefusedAndLeavesTheMapAsItWas) {
  Router router({kSeedA});
  router.replace({SlotRange{0, kClusterSlots - 1, kMaster1}});
  for (const SlotRange& bad : {SlotRange{-1, 10, kMaster2}, SlotRange{10, kClusterSlots, kMaster2},
                               SlotRange{11, 10, kMaster2}}) {
    // The good range before the bad one is not applied either.
    EXPECT_THROW(router.replace({SlotRange{0, 5, kSeedA}, bad}), fairsem::InvalidArgument)
        << bad.first << "-" << bad.last;
    EXPECT_EQ(router.lookup(0), kMaster1);
    EXPECT_EQ(router.lookup(10), kMaster1);
    EXPECT_EQ(router.nodes(), (std::vector<NodeAddress>{kSeedA, kMaster1}));
  }
}

TEST(RouterTest, ForgetUnmapsEverySlotButKeepsEveryNodeToAsk) {
  Router router({kSeedA});
  router.replace({SlotRange{0, 99, kMaster1}, SlotRange{100, kClusterSlots - 1, kMaster2}});
  router.moved(5, kMaster3);
  router.forget();
  for (const int slot : {0, 5, 99, 100, kClusterSlots - 1})
    EXPECT_FALSE(router.lookup(slot)) << slot;
  EXPECT_EQ(router.lookup(-1), kSeedA);
  EXPECT_EQ(router.nodes(), (std::vector<NodeAddress>{kSeedA, kMaster1, kMaster2, kMaster3}));
}

TEST(RouterTest, ASentinelsMasterServesEverySlotUntilForgotten) {
  Router router;  // how Discovery keeps the master a sentinel named
  router.replace({SlotRange{0, kClusterSlots - 1, kMaster1}});
  EXPECT_EQ(router.lookup(-1), kMaster1);
  EXPECT_EQ(router.lookup(0), kMaster1);
  EXPECT_EQ(router.lookup(kClusterSlots - 1), kMaster1);
  router.forget();
  EXPECT_FALSE(router.lookup(-1));  // no seed to fall back on: the sentinels are asked again
  EXPECT_FALSE(router.lookup(0));
}

}  // namespace
