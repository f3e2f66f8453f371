#include <gtest/gtest.h>

#include <fairsem/impl/router.hpp>

#include <string>

namespace {

using fairsem::NodeAddress;
using fairsem::detail::key_slot;
using fairsem::detail::parse_redirect;
using fairsem::detail::Redirect;

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

}  // namespace
