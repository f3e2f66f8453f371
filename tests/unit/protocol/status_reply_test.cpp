// The status script's reply (fairsem/impl/protocol/status_reply-inl.hpp): its entries, the
// tenants' stored weights, and each tenant's totals.

#include <gtest/gtest.h>

#include <fairsem/errors.hpp>
#include <fairsem/impl/protocol/replies.hpp>
#include <fairsem/impl/protocol/reply.hpp>

#include <chrono>
#include <climits>
#include <string>
#include <utility>
#include <vector>

namespace status_reply_test {

using fairsem::ProtocolError;
using fairsem::detail::Reply;
using std::chrono::milliseconds;

Reply integer(long long v) { return Reply::make_integer(v); }
Reply bulk(std::string s) { return Reply::make_string(std::move(s)); }
Reply array(std::vector<Reply> items) { return Reply::make_array(std::move(items)); }
Reply nil() { return Reply::make_nil(); }

constexpr long long kNow = 1'700'000'000'000;  // a plausible server clock, in ms
constexpr std::size_t kHead = 3;               // now, limit, counter
constexpr std::size_t kOldEntry = 7;           // an entry's elements without its tenant

// The reply of a semaphore without tenants, written as {now, limit, counter, entry...} with 7
// elements per entry: no stored weights, and each entry of the default tenant. Anything else
// (a malformed reply) gets only the weights' count, so it stays malformed.
fairsem::Status decode(Reply legacy) {
  if (legacy.type != Reply::Type::array || legacy.elements.size() < kHead) {
    return fairsem::detail::decode_status(legacy);
  }
  std::vector<Reply>& old = legacy.elements;
  std::vector<Reply> items(old.begin(), old.begin() + kHead);
  items.push_back(integer(0));
  const bool whole = (old.size() - kHead) % kOldEntry == 0;
  for (std::size_t i = kHead; i < old.size(); ++i) {
    items.push_back(std::move(old[i]));
    if (whole && (i - kHead) % kOldEntry == kOldEntry - 1) items.push_back(bulk(""));
  }
  return fairsem::detail::decode_status(array(std::move(items)));
}

TEST(StatusReplyTest, SplitsHoldersFromWaiters) {
  const auto s =
      decode(array({integer(kNow),       integer(2),        integer(9),  //
                    bulk("a"),           integer(7),        integer(kNow + 500),  bulk("h:1"),
                    integer(1),          bulk("1"),         integer(-1),          bulk("b"),
                    integer(8),          integer(kNow - 5), bulk("h:2"),          integer(1),
                    bulk("0"),
                    integer(kNow - 900),  //
                    bulk("c"),           integer(9),        integer(kNow + 1000), bulk(""),
                    integer(1),          bulk(""),          integer(kNow - 250)}));
  EXPECT_EQ(s.limit, 2);
  EXPECT_EQ(s.last_ticket, 9);
  ASSERT_EQ(s.holders.size(), 2u);
  ASSERT_EQ(s.waiters.size(), 1u);
  EXPECT_EQ(s.holders[0].id, "a");
  EXPECT_EQ(s.holders[0].ticket, 7);
  EXPECT_EQ(s.holders[0].lease_left, milliseconds(500));
  EXPECT_EQ(s.holders[0].owner, "h:1");
  EXPECT_EQ(s.holders[0].slot, 1);
  EXPECT_EQ(s.holders[1].slot, 0);
  EXPECT_EQ(s.waiters[0].slot, -1);
  EXPECT_EQ(s.holders[1].lease_left, milliseconds(0));  // overdue: never negative
  EXPECT_EQ(s.waiters[0].id, "c");
  EXPECT_EQ(s.waiters[0].lease_left, milliseconds(1000));
  // How long a waiter has waited, by the server's clock; nothing for a holder.
  EXPECT_EQ(s.waiters[0].waited, milliseconds(250));
  EXPECT_FALSE(s.holders[1].waited.has_value());
}

TEST(StatusReplyTest, EmptySemaphoreAndOddButValidValues) {
  using fairsem::detail::decode_status;
  // Counter -1 means the counter holds something that is not a number.
  const auto s = decode(array({integer(kNow), integer(0), integer(-1), bulk("a"), integer(1),
                               integer(LLONG_MIN), bulk(""), integer(1), bulk(""), integer(-1)}));
  EXPECT_EQ(s.last_ticket, -1);
  EXPECT_TRUE(s.holders.empty());
  ASSERT_EQ(s.waiters.size(), 1u);
  EXPECT_EQ(s.waiters[0].lease_left, milliseconds(0));
  EXPECT_FALSE(s.waiters[0].waited.has_value());  // queued by a client of 0.3.1
  // Queued "later" than the server's now (another clock, after a failover): waited 0.
  EXPECT_EQ(decode(array({integer(kNow), integer(1), integer(1), bulk("a"), integer(1),
                          integer(kNow), bulk(""), integer(1), bulk(""), integer(kNow + 5)}))
                .waiters.at(0)
                .waited,
            milliseconds(0));
  const auto far =
      decode(array({integer(0), integer(1), integer(1), bulk("a"), integer(1), integer(LLONG_MAX),
                    bulk(""), integer(1), bulk("0"), integer(-1)}));
  EXPECT_EQ(far.holders.at(0).lease_left, milliseconds(LLONG_MAX));
  // Right after a shrink, more holders than the limit.
  const auto shrunk =
      decode(array({integer(kNow), integer(1), integer(2), bulk("a"), integer(1), integer(kNow),
                    bulk(""), integer(1), bulk("1"), integer(-1), bulk("b"), integer(2),
                    integer(kNow), bulk(""), integer(1), bulk("0"), integer(-1)}));
  // A weighted holder and a weighted waiter.
  const auto weighted =
      decode(array({integer(kNow), integer(8), integer(2), bulk("a"), integer(1), integer(kNow),
                    bulk(""), integer(3), bulk("0,2,5"), integer(-1), bulk("b"), integer(2),
                    integer(kNow), bulk(""), integer(4), bulk(""), integer(5)}));
  ASSERT_EQ(weighted.holders.size(), 1u);
  EXPECT_EQ(weighted.holders[0].count, 3);
  EXPECT_EQ(weighted.holders[0].slots, (std::vector<long long>{0, 2, 5}));
  EXPECT_EQ(weighted.holders[0].slot, 0);
  ASSERT_EQ(weighted.waiters.size(), 1u);
  EXPECT_EQ(weighted.waiters[0].count, 4);
  EXPECT_TRUE(weighted.waiters[0].slots.empty());
  EXPECT_EQ(shrunk.holders.size(), 2u);
  EXPECT_TRUE(decode(array({integer(kNow), integer(1), integer(0)})).holders.empty());
}

TEST(StatusReplyTest, MalformedRepliesThrowProtocolError) {
  using fairsem::detail::decode_status;
  const auto head = [] { return std::vector<Reply>{integer(kNow), integer(1), integer(1)}; };
  const auto with = [&](std::vector<Reply> entry) {
    auto items = head();
    for (auto& e : entry) items.push_back(std::move(e));
    return array(std::move(items));
  };
  EXPECT_THROW((void)decode(nil()), ProtocolError);
  EXPECT_THROW((void)decode(array({integer(kNow), integer(1)})), ProtocolError);
  EXPECT_THROW((void)decode(with({bulk("a")})), ProtocolError);
  EXPECT_THROW((void)decode(with({bulk("a"), integer(1), integer(kNow)})), ProtocolError);
  EXPECT_THROW((void)decode(with({bulk("a"), integer(1), integer(kNow), bulk("")})),
               ProtocolError);  // no slot
  EXPECT_THROW((void)decode(with({integer(1), integer(1), integer(kNow), bulk(""), integer(1),
                                  bulk("0"), integer(-1)})),
               ProtocolError);
  EXPECT_THROW((void)decode(with({bulk("a"), bulk("1"), integer(kNow), bulk(""), integer(1),
                                  bulk("0"), integer(-1)})),
               ProtocolError);
  EXPECT_THROW((void)decode(with(
                   {bulk("a"), integer(1), nil(), bulk(""), integer(1), bulk("0"), integer(-1)})),
               ProtocolError);
  const auto entry = [&](Reply units, Reply slots, Reply queued = integer(-1)) {
    return with({bulk("a"), integer(1), integer(kNow), bulk(""), std::move(units), std::move(slots),
                 std::move(queued)});
  };
  EXPECT_THROW((void)decode(with({bulk("a"), integer(1), integer(kNow), nil(), integer(1),
                                  bulk("0"), integer(-1)})),
               ProtocolError);
  // The 6 elements per entry of 0.3.1's status reply, and a queue time that is not one.
  EXPECT_THROW(
      (void)decode(with({bulk("a"), integer(1), integer(kNow), bulk(""), integer(1), bulk("0")})),
      ProtocolError);
  EXPECT_THROW((void)decode(entry(integer(1), bulk(""), integer(-2))), ProtocolError);
  EXPECT_THROW((void)decode(entry(integer(1), bulk(""), bulk("5"))), ProtocolError);
  EXPECT_THROW((void)decode(entry(nil(), bulk("0"))), ProtocolError);
  EXPECT_THROW((void)decode(entry(integer(1), nil())), ProtocolError);
  EXPECT_THROW((void)decode(entry(integer(1), integer(0))), ProtocolError);
  EXPECT_THROW((void)decode(entry(integer(0), bulk(""))), ProtocolError);  // no units
  EXPECT_THROW((void)decode(entry(integer(1'000'000'001), bulk(""))), ProtocolError);
  EXPECT_THROW((void)decode(entry(integer(2), bulk("0"))),
               ProtocolError);                                                // 2 units, 1 slot
  EXPECT_THROW((void)decode(entry(integer(2), bulk("1,1"))), ProtocolError);  // twice
  EXPECT_THROW((void)decode(entry(integer(2), bulk("2,1"))), ProtocolError);  // unsorted
  EXPECT_THROW((void)decode(entry(integer(1), bulk("-2"))), ProtocolError);
  EXPECT_THROW((void)decode(entry(integer(1), bulk("1000000000"))), ProtocolError);
  EXPECT_THROW((void)decode(entry(integer(2), bulk("1,"))), ProtocolError);
  EXPECT_THROW((void)decode(entry(integer(1), bulk("x"))), ProtocolError);
  EXPECT_THROW((void)decode(array({integer(-1), integer(1), integer(1)})), ProtocolError);
  EXPECT_THROW((void)decode(array({integer(kNow), integer(-1), integer(1)})), ProtocolError);
  EXPECT_THROW((void)decode(array({integer(kNow), integer(1), integer(-2)})), ProtocolError);
}

TEST(StatusReplyTest, AddsUpEachTenantWithItsWeight) {
  // Tenant "b" weighs 2 (stored); "a" holds 1 unit and waits for 3 (oldest 900 ms); the default
  // tenant holds 2; "c" has a weight and nobody.
  const auto s = fairsem::detail::decode_status(array({
      integer(kNow), integer(4),  integer(12),         integer(2),  //
      bulk("b"),     integer(2),  bulk("c"),           integer(5),  //
      bulk("h1"),    integer(11), integer(kNow + 500), bulk("o"),
      integer(1),    bulk("0"),   integer(-1),         bulk("a"),  //
      bulk("h2"),    integer(12), integer(kNow + 500), bulk("o"),
      integer(2),    bulk("1,2"), integer(-1),         bulk(""),  //
      bulk("w1"),    integer(8),  integer(kNow + 500), bulk("o"),
      integer(2),    bulk(""),    integer(kNow - 900), bulk("a"),  //
      bulk("w2"),    integer(9),  integer(kNow + 500), bulk("o"),
      integer(1),    bulk(""),    integer(kNow - 100), bulk("a"),  //
  }));
  // A holder after a waiter in ticket order: a promoted waiter's new ticket (tenants.lua).
  ASSERT_EQ(s.holders.size(), 2u);
  ASSERT_EQ(s.waiters.size(), 2u);
  EXPECT_EQ(s.holders[0].tenant, "a");
  EXPECT_EQ(s.holders[1].tenant, "");
  EXPECT_EQ(s.waiters[1].tenant, "a");
  ASSERT_EQ(s.tenants.size(), 4u);
  EXPECT_EQ(s.tenants[0].name, "");
  EXPECT_EQ(s.tenants[0].held, 2);
  EXPECT_EQ(s.tenants[0].weight, 1);
  EXPECT_EQ(s.tenants[1].name, "a");
  EXPECT_EQ(s.tenants[1].held, 1);
  EXPECT_EQ(s.tenants[1].holders, 1);
  EXPECT_EQ(s.tenants[1].waiting, 3);
  EXPECT_EQ(s.tenants[1].waiters, 2);
  EXPECT_EQ(s.tenants[1].oldest_wait, milliseconds(900));
  EXPECT_EQ(s.tenants[2].name, "b");
  EXPECT_EQ(s.tenants[2].weight, 2);
  EXPECT_EQ(s.tenants[2].waiters, 0);
  EXPECT_FALSE(s.tenants[2].oldest_wait.has_value());
  EXPECT_EQ(s.tenants[3].name, "c");
  EXPECT_EQ(s.tenants[3].weight, 5);
}

TEST(StatusReplyTest, MalformedWeightsThrowProtocolError) {
  using fairsem::detail::decode_status;
  const auto head = [](std::vector<Reply> rest) {
    std::vector<Reply> items{integer(kNow), integer(1), integer(1)};
    for (auto& r : rest) items.push_back(std::move(r));
    return array(std::move(items));
  };
  EXPECT_THROW((void)decode_status(head({})), ProtocolError);             // no count
  EXPECT_THROW((void)decode_status(head({integer(-1)})), ProtocolError);  // negative count
  EXPECT_THROW((void)decode_status(head({integer(1)})), ProtocolError);   // missing pair
  EXPECT_THROW((void)decode_status(head({integer(1), bulk("a"), integer(0)})), ProtocolError);
  EXPECT_THROW((void)decode_status(head({integer(1), integer(3), integer(2)})), ProtocolError);
  EXPECT_EQ(decode_status(head({integer(1), bulk("a"), integer(3)})).tenants.at(0).weight, 3);
}

TEST(TenantReplyTest, DecodesTheOldWeight) {
  using fairsem::detail::decode_tenant;
  EXPECT_EQ(decode_tenant(array({integer(4)})), 4);
  EXPECT_THROW((void)decode_tenant(array({integer(0)})), ProtocolError);
  EXPECT_THROW((void)decode_tenant(array({})), ProtocolError);
  EXPECT_THROW((void)decode_tenant(nil()), ProtocolError);
}

}  // namespace status_reply_test
