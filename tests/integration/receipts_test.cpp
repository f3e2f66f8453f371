// Release receipts: a release of a holder leaves one, so that the release run again after a
// lost reply can tell "released by the earlier run" from "expired". They live in one sorted set
// per semaphore (P:{NAME}:receipts), scored by when each may go (RECEIPT_MS, the client's retry
// budget, after the release) and pruned by every release: the keyspace does not grow with the
// release rate, and a receipt is there for as long as a retry may ask for it.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

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
    const std::string id = "p" + std::to_string(i);
    ASSERT_EQ(run({"acquire", id, "try", "o"}).elements.at(0).integer, 1);
    const long long before = server_ms();
    ASSERT_EQ(run({"release", id, std::to_string(i), "100"}).elements.at(0).integer, 1);
    const long long after = server_ms();
    const Reply score =
        admin_.command({"ZSCORE", key("r", "receipts"), id + ":" + std::to_string(i)});
    ASSERT_EQ(score.type, Reply::Type::string) << id << "'s receipt is missing";
    EXPECT_GE(std::stoll(score.str), before + 100);
    EXPECT_LE(std::stoll(score.str), after + 100);
  }
  // No key per release: the counter, meta and the receipts are all that is left.
  EXPECT_THAT(keys_of("r"),
              UnorderedElementsAre(key("r", "counter"), key("r", "meta"), key("r", "receipts")));
  // Those of the last 100 ms are there, the newest for certain.
  auto kept = receipts();
  ASSERT_FALSE(kept.empty());
  EXPECT_EQ(kept.back().first, "p50:50");
  EXPECT_EQ(run({"release", "p50", "50", "100"}).elements.at(0).integer, 3);  // released earlier
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
  // With an idle expiry (5 s), tickets start at 1024 x the server clock: each is read back.
  const auto pair = [&](const std::string& id) {
    const Reply granted = run({"acquire", id, "try", "o", "0", "1", "", "0", "5000"});
    EXPECT_EQ(granted.elements.at(0).integer, 1);
    const std::string ticket = std::to_string(granted.elements.at(1).integer);
    EXPECT_EQ(run({"release", id, ticket, "100"}).elements.at(0).integer, 1);
    return id + ":" + ticket;
  };
  for (int i = 1; i <= 50; ++i) pair("p" + std::to_string(i));
  const long long last = receipts().back().second;
  ASSERT_EQ(receipts().size(), 50U);
  ASSERT_TRUE(test::wait_until([&] { return server_ms() > last; }, 10s));
  admin_.command({"CONFIG", "RESETSTAT"});
  const std::string q = pair("q");
  EXPECT_THAT(receipts(), ElementsAre(::testing::Key(q)));
  EXPECT_EQ(calls("unlink"), 1);
  EXPECT_EQ(calls("zremrangebyrank"), 0);
  EXPECT_GT(admin_.command({"PTTL", key("r", "receipts")}).integer, 0);
  const auto colon = q.find(':');
  EXPECT_EQ(run({"release", "q", q.substr(colon + 1), "100"}).elements.at(0).integer, 3);
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

// With an idle expiry, the receipts set lives until its newest receipt may go; a release pushes
// its expiry on (meta's `receipts`) only when its receipt goes beyond it, to one receipt
// lifetime past that receipt, rather than on every release.
TEST_F(ReceiptsTest, WithAnIdleExpiryOnlyAReceiptBeyondTheSetsExpiryPushesItOn) {
  // Lease 300 ms, an idle expiry of 5 s (the other keys stay throughout), receipts of 400 ms.
  const auto pair = [&](const std::string& id) {
    const Reply granted = run({"acquire", id, "try", "o", "0", "1", "", "0", "5000"}, "300");
    ASSERT_EQ(granted.elements.at(0).integer, 1);
    const std::string ticket = std::to_string(granted.elements.at(1).integer);
    ASSERT_EQ(run({"release", id, ticket, "400"}, "300").elements.at(0).integer, 1);
  };
  const auto until = [&] {
    return std::stoll(admin_.command({"HGET", key("r", "meta"), "receipts"}).str);
  };
  const auto expire_time = [&] {
    return admin_.command({"PEXPIRETIME", key("r", "receipts")}).integer;
  };
  pair("a");
  const long long first = until();
  EXPECT_EQ(first, receipts().back().second + 400);
  if (has_functions()) {  // PEXPIRETIME: Redis 7, Valkey
    EXPECT_EQ(expire_time(), first);
  }
  pair("b");
  ASSERT_LE(receipts().back().second, first);
  EXPECT_EQ(until(), first) << "a receipt within the set's expiry pushed it on";
  if (has_functions()) {
    EXPECT_EQ(expire_time(), first);
  }
  // The next receipt goes beyond it, and takes it on.
  ASSERT_TRUE(test::wait_until([&] { return server_ms() + 400 > first; }, 10s));
  pair("c");
  ASSERT_GT(receipts().back().second, first);
  EXPECT_EQ(until(), receipts().back().second + 400);
  if (has_functions()) {
    EXPECT_EQ(expire_time(), until());
  }
  EXPECT_GT(admin_.command({"PTTL", key("r", "receipts")}).integer, 0);
}

}  // namespace
}  // namespace fairsem
