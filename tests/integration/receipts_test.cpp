// Release receipts: a release of a holder leaves one, so that the release run again after a
// lost reply can tell "released by the earlier run" from "expired". They live in one sorted set
// per semaphore (P:{NAME}:receipts), scored by when each may go (RECEIPT_MS, the client's retry
// budget, after the release) and pruned by every release: the keyspace does not grow with the
// release rate, and a receipt is there for as long as a retry may ask for it.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "acl_rule.hpp"
#include "semaphore_fixture.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using detail::Args;
using detail::Connection;
using detail::Reply;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

class ReceiptsTest : public test::SemaphoreFixture {
 protected:
  /// Runs operation `args[0]` of semaphore "r" directly: limit 1, a lease of `lease_ms`.
  Reply run(const Args& args, const std::string& lease_ms = "200") {
    Args full{args[0], "1", lease_ms};
    full.insert(full.end(), args.begin() + 1, args.end());
    const std::vector<std::string> keys = script_keys("r");
    return conn_.eval(detail::scripts::semaphore_script(args[0]), Args(keys.begin(), keys.end()),
                      full);
  }
  /// An acquire and a release of `id` on `conn` with an idle expiry of 10 s and receipts of
  /// `receipt_ms`; returns the receipt's member, ID:TICKET.
  std::string pair_with_expiry(Connection& conn, const std::string& id,
                               const std::string& receipt_ms) {
    const std::vector<std::string> keys = script_keys("r");
    const Args key_args(keys.begin(), keys.end());
    const Reply granted =
        conn.eval(detail::scripts::semaphore_acquire, key_args,
                  {"acquire", "1", "200", id, "try", "o", "0", "1", "", "0", "10000"});
    EXPECT_EQ(granted.elements.at(0).integer, 1) << id;
    const std::string ticket = std::to_string(granted.elements.at(1).integer);
    EXPECT_EQ(conn.eval(detail::scripts::semaphore_release, key_args,
                        {"release", "1", "200", id, ticket, receipt_ms})
                  .elements.at(0)
                  .integer,
              1)
        << id;
    return id + ":" + ticket;
  }
  /// The receipts set: member -> when it may go, in that order.
  std::vector<std::pair<std::string, long long>> receipts(const std::string& name = "r") {
    const Reply r = admin_.command({"ZRANGE", key(name, "receipts"), "0", "-1", "WITHSCORES"});
    std::vector<std::pair<std::string, long long>> out;
    for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2) {
      out.emplace_back(r.elements[i].str, std::stoll(r.elements[i + 1].str));
    }
    return out;
  }
  std::vector<std::string> keys_of(const std::string& name) {
    std::vector<std::string> out;
    for (const Reply& k : admin_.command({"KEYS", prefix_ + ":{" + name + "}:*"}).elements) {
      out.push_back(k.str);
    }
    return out;
  }

  Connection conn_{test::redis_options()};
};

// 50 permits released one after another leave their receipts in one key, each kept RECEIPT_MS
// after its release. Once they are past their time (but one that is kept longer), each release
// prunes the oldest 8 (work bounded however many there are), until fewer than 8 are left.
TEST_F(ReceiptsTest, ReleasesShareOneSetThatEachReleasePrunes) {
  for (int i = 1; i <= 50; ++i) {
    // A lifetime of 100 + i ms: no two receipts go in the same ms (a prune of the oldest 8 also
    // takes those of the same ms as the 8th).
    const std::string id = "p" + std::to_string(i);
    const int lifetime = 100 + i;
    ASSERT_EQ(run({"acquire", id, "try", "o"}).elements.at(0).integer, 1);
    const long long before = server_ms();
    ASSERT_EQ(
        run({"release", id, std::to_string(i), std::to_string(lifetime)}).elements.at(0).integer,
        1);
    const long long after = server_ms();
    const Reply score =
        admin_.command({"ZSCORE", key("r", "receipts"), id + ":" + std::to_string(i)});
    ASSERT_EQ(score.type, Reply::Type::string) << id << "'s receipt is missing";
    EXPECT_GE(std::stoll(score.str), before + lifetime);
    EXPECT_LE(std::stoll(score.str), after + lifetime);
  }
  // No key per release: the counter, meta and the receipts are all that is left.
  EXPECT_THAT(keys_of("r"),
              UnorderedElementsAre(key("r", "counter"), key("r", "meta"), key("r", "receipts")));
  // Those of the last 100 ms are there, the newest for certain.
  auto kept = receipts();
  ASSERT_FALSE(kept.empty());
  EXPECT_EQ(kept.back().first, "p50:50");
  EXPECT_EQ(run({"release", "p50", "50", "150"}).elements.at(0).integer, 3);  // released earlier
  // One receipt kept for a minute (a client with a longer retry budget).
  ASSERT_EQ(run({"acquire", "live", "try", "o"}).elements.at(0).integer, 1);
  ASSERT_EQ(run({"release", "live", "51", "60000"}).elements.at(0).integer, 1);

  // Once the server's clock has passed every other receipt's time, each release adds its own
  // and removes the oldest 8.
  const long long last = kept.back().second;
  kept = receipts();
  ASSERT_TRUE(test::wait_until([&] { return server_ms() > last; }, 10s));
  long long ticket = 52;
  const auto pair = [&] {
    const std::string id = "q" + std::to_string(ticket);
    ASSERT_EQ(run({"acquire", id, "try", "o"}).elements.at(0).integer, 1);
    ASSERT_EQ(run({"release", id, std::to_string(ticket), "60000"}).elements.at(0).integer, 1);
    ++ticket;
  };
  std::size_t stale = kept.size() - 1;
  while (stale >= 8) {
    pair();
    const auto now = receipts();
    ASSERT_EQ(now.size(), kept.size() + 1 - 8);
    EXPECT_EQ(now.back().first,
              "q" + std::to_string(ticket - 1) + ":" + std::to_string(ticket - 1));
    kept = now;
    stale -= 8;
  }
  // Fewer than 8 past their time stay: the next release leaves them.
  pair();
  EXPECT_EQ(receipts().size(), kept.size() + 1);
  // A retry whose receipt went is told "not there" (expired), as when a key expired.
  EXPECT_EQ(run({"release", "p1", "1", "100"}).elements.at(0).integer, 0);
}

// A burst of releases, then a pause longer than a receipt's lifetime: the next release finds
// every receipt but its own past their time, and the whole set goes at once (UNLINK: the server
// frees it in the background) rather than 8 per release. With an idle expiry the new set has
// its expiry again.
TEST_F(ReceiptsTest, APauseAfterABurstLetsTheNextReleaseDropTheWholeSetAtOnce) {
  // Receipts of 2 s, an idle expiry of 10 s (tickets then start at 1024 x the server clock:
  // each is read back).
  for (int i = 1; i <= 50; ++i) pair_with_expiry(conn_, "p" + std::to_string(i), "2000");
  const long long last = receipts().back().second;
  ASSERT_EQ(receipts().size(), 50U);
  ASSERT_TRUE(test::wait_until([&] { return server_ms() > last; }, 10s));
  admin_.command({"CONFIG", "RESETSTAT"});
  const std::string q = pair_with_expiry(conn_, "q", "2000");
  EXPECT_THAT(receipts(), ElementsAre(::testing::Key(q)));
  EXPECT_EQ(calls("unlink"), 1);
  EXPECT_EQ(calls("zremrangebyscore"), 0);
  EXPECT_GT(admin_.command({"PTTL", key("r", "receipts")}).integer, 0);
  const auto colon = q.find(':');
  EXPECT_EQ(run({"release", "q", q.substr(colon + 1), "2000"}).elements.at(0).integer, 3);
}

// A user whose ACL lacks UNLINK (one written for 0.3.x): the release after a pause prunes the
// oldest 8 instead, and nothing fails.
TEST_F(ReceiptsTest, WithoutUnlinkInTheAclAPauseIsPrunedEightAtATime) {
  const std::string user = "receipts-" + std::to_string(::getpid());
  std::string rule = test::fairsem_acl_rule(admin_);
  rule.replace(rule.find("+unlink "), 8, "");
  rule.replace(rule.find("~fairsem:*"), 10, "~" + prefix_ + ":*");
  test::set_acl_user(admin_, user, "pw", rule);
  ConnectionOptions o = test::redis_options();
  o.user = user;
  o.password = "pw";
  Connection limited(o);
  // Lifetimes of 2000 + i ms: no two receipts go in the same ms.
  for (int i = 1; i <= 20; ++i) {
    pair_with_expiry(limited, "p" + std::to_string(i), std::to_string(2000 + i));
  }
  const long long last = receipts().back().second;
  ASSERT_EQ(receipts().size(), 20U);
  ASSERT_TRUE(test::wait_until([&] { return server_ms() > last; }, 10s));
  const std::string q = pair_with_expiry(limited, "q", "2000");
  EXPECT_EQ(receipts().size(), 20U + 1 - 8);
  EXPECT_EQ(receipts().back().first, q);
  admin_.command({"ACL", "DELUSER", user});
}

// A receipt is for one permit, its id and its ticket: a later permit of the same id, or
// another id with the same ticket, is not taken for it.
TEST_F(ReceiptsTest, AReceiptNamesTheIdAndTheTicket) {
  ASSERT_EQ(run({"acquire", "a", "try", "o"}, "60000").elements.at(0).integer, 1);
  ASSERT_EQ(run({"release", "a", "1", "60000"}, "60000").elements.at(0).integer, 1);
  EXPECT_THAT(receipts(), ElementsAre(::testing::Key("a:1")));
  EXPECT_EQ(run({"release", "a", "1", "60000"}, "60000").elements.at(0).integer, 3);
  EXPECT_EQ(run({"release", "a", "2", "60000"}, "60000").elements.at(0).integer, 0);
  EXPECT_EQ(run({"release", "b", "1", "60000"}, "60000").elements.at(0).integer, 0);
}

// A release whose ticket or receipt time is not an integer (a client's bug, another program)
// is refused with an error that names them, before anything is written.
TEST_F(ReceiptsTest, AGarbledTicketOrReceiptTimeIsRefusedWithNothingWritten) {
  ASSERT_EQ(run({"acquire", "a", "try", "o"}, "60000").elements.at(0).integer, 1);
  const auto before = snapshot();
  for (const Args& bad : {Args{"release", "a", "1", "sixty"}, Args{"release", "a", "1"},
                          Args{"release", "a", "1", "-1"}, Args{"release", "a", "1", "1.5"},
                          Args{"release", "a", "one", "60000"}}) {
    try {
      run(bad, "60000");
      ADD_FAILURE() << "accepted: " << bad.size() << " arguments";
    } catch (const ReplyError& e) {
      EXPECT_THAT(e.server_message(), HasSubstr("release needs TICKET (an integer) and "
                                                "RECEIPT_MS (whole ms, at least 0)"));
    }
  }
  EXPECT_EQ(snapshot(), before);
  EXPECT_EQ(run({"release", "a", "1", "60000"}, "60000").elements.at(0).integer, 1);
}

// A key of another type where the receipts go costs only the receipts: the release frees the
// permit, leaves the key alone, and a retry is told "not there" rather than "released".
TEST_F(ReceiptsTest, AForeignReceiptsKeyCostsOnlyTheReceipt) {
  admin_.command({"SET", key("r", "receipts"), "not fairsem's"});
  ASSERT_EQ(run({"acquire", "a", "try", "o"}, "60000").elements.at(0).integer, 1);
  EXPECT_EQ(run({"release", "a", "1", "60000"}, "60000").elements.at(0).integer, 1);
  EXPECT_EQ(run({"release", "a", "1", "60000"}, "60000").elements.at(0).integer, 0);
  EXPECT_EQ(admin_.command({"GET", key("r", "receipts")}).str, "not fairsem's");
  EXPECT_EQ(integer({"EXISTS", key("r", "owner")}), 0);
}

// A semaphore with an idle expiry leaves nothing behind for good, the receipts included; but
// they outlive its other keys for as long as a retry of the release may ask for them.
TEST_F(ReceiptsTest, WithAnIdleExpiryTheReceiptsOutliveTheOtherKeysAndThenGo) {
  SemaphoreOptions o = options(1, 300ms);
  o.idle_expiry = 300ms;
  o.auto_renew = false;
  FairSemaphore sem(test::redis_options(), "expiring", o);
  std::optional<Permit> p = sem.try_acquire();
  ASSERT_TRUE(p);
  const std::string member = p->id() + ":" + std::to_string(p->fencing_token());
  ASSERT_EQ(p->release(), ReleaseResult::released);
  ASSERT_EQ(receipts("expiring").size(), 1u);
  EXPECT_EQ(receipts("expiring")[0].first, member);
  // Every other key goes between 300 and 450 ms after the last acquire; the receipts stay
  // until their last one's time (the client's retry budget after the lease), and then go too.
  ASSERT_TRUE(test::wait_until([&] { return keys_of("expiring").size() == 1; }, 10s))
      << ::testing::PrintToString(keys_of("expiring"));
  EXPECT_THAT(keys_of("expiring"), ElementsAre(key("expiring", "receipts")));
  EXPECT_GT(admin_.command({"PTTL", key("expiring", "receipts")}).integer, 0);
  if (has_functions()) {  // Redis 7.0 and later, Valkey: when the set goes, to the ms
    EXPECT_GE(admin_.command({"PEXPIRETIME", key("expiring", "receipts")}).integer,
              receipts("expiring")[0].second);
  }
}

// With an idle expiry, the receipts set lives until its newest receipt may go. While it holds
// fewer than 8 receipts (as after it was made anew) each release gives it its expiry; beyond
// that, a release pushes it on (meta's `receipts`) only when its receipt goes beyond it, to one
// receipt lifetime past that receipt, rather than on every release.
TEST_F(ReceiptsTest, WithAnIdleExpiryOnlyAReceiptBeyondTheSetsExpiryPushesItOn) {
  // Receipts of 2 s; an idle expiry of 10 s, so the other keys stay throughout.
  const auto until = [&] {
    return std::stoll(admin_.command({"HGET", key("r", "meta"), "receipts"}).str);
  };
  const auto expire_time = [&] {
    return admin_.command({"PEXPIRETIME", key("r", "receipts")}).integer;
  };
  for (int i = 1; i <= 8; ++i) pair_with_expiry(conn_, "a" + std::to_string(i), "2000");
  // The 7th release, to a set of 7, gave it its last receipt's time + 2 s; the 8th's is before.
  const long long first = until();
  ASSERT_EQ(receipts().size(), 8U);
  EXPECT_EQ(first, receipts()[6].second + 2000);
  EXPECT_GE(first, receipts().back().second);
  if (has_functions()) {  // PEXPIRETIME: Redis 7, Valkey
    EXPECT_EQ(expire_time(), first);
  }
  pair_with_expiry(conn_, "b", "2000");
  ASSERT_EQ(receipts().size(), 9U);
  ASSERT_LE(receipts().back().second, first);
  EXPECT_EQ(until(), first) << "a receipt within the set's expiry pushed it on";
  if (has_functions()) {
    EXPECT_EQ(expire_time(), first);
  }
  // The next receipt goes beyond it, and takes it on.
  ASSERT_TRUE(test::wait_until([&] { return server_ms() + 2000 > first; }, 10s));
  pair_with_expiry(conn_, "c", "2000");
  ASSERT_GT(receipts().back().second, first);
  EXPECT_EQ(until(), receipts().back().second + 2000);
  if (has_functions()) {
    EXPECT_EQ(expire_time(), until());
  }
  // A set deleted behind the semaphore's back (an operator, maxmemory eviction) is made anew
  // by the next release, with its expiry, though meta's `receipts` is later still.
  admin_.command({"DEL", key("r", "receipts")});
  pair_with_expiry(conn_, "d", "2000");
  EXPECT_GT(admin_.command({"PTTL", key("r", "receipts")}).integer, 0);
}

}  // namespace
}  // namespace fairsem
