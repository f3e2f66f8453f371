// Release receipts: a release of a holder leaves one, so that the release run again after a
// lost reply can tell "released by the earlier run" from "expired". Each is a field ID:TICKET
// of a bucket, a hash P:{NAME}:receipts:E of the receipts that may go in the same W ms
// (RECEIPT_MS, the client's retry budget, after the release; W = 4,096 ms, doubled until
// RECEIPT_MS is at most 16 W), named after when it expires as a whole, after the last of them
// may go: a release costs the same whatever the history, nothing is pruned, and a receipt is
// there for as long as a retry may ask for it.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "redis_server.hpp"
#include "semaphore_fixture.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using detail::Args;
using detail::Reply;
using ::testing::Contains;
using ::testing::HasSubstr;

// RECEIPT_BUCKET_MS and RECEIPT_BUCKETS of src/lua/semaphore/common.lua, as documented in
// keys-and-scripts.md: a lifetime up to 16 x 4,096 ms has buckets of 4,096 ms.
constexpr long long kBucketMs = 4096;
constexpr long long kBuckets = 16;
constexpr long long kThirtyDaysMs = 30LL * 24 * 3600 * 1000;
// A 30-day lifetime: 4,096 ms doubled 16 times (268,435,456 ms, 3.1 days) is the first width
// of which it is at most 16.
constexpr long long kThirtyDayBucketMs = kBucketMs << 16;
static_assert(kThirtyDaysMs <= kBuckets * kThirtyDayBucketMs &&
              kThirtyDaysMs > kBuckets * (kThirtyDayBucketMs / 2));

class ReceiptsTest : public test::SemaphoreFixture {
 protected:
  /// Runs operation `args[0]` of semaphore "r" directly: limit 1, a lease of `lease_ms`.
  Reply run(const Args& args, const std::string& lease_ms = "200") {
    return run_op(conn_, "r", args, "1", lease_ms);
  }
  /// Acquires `id` and releases it with receipts of `receipt_ms`; returns its ticket and the
  /// server's clock just before and just after the release.
  struct Released {
    std::string ticket;
    long long before = 0;
    long long after = 0;
  };
  Released pair(const std::string& id, long long receipt_ms, const std::string& lease = "200") {
    Released r;
    const Reply granted = run({"acquire", id, "try", "o"}, lease);
    EXPECT_EQ(granted.elements.at(0).integer, 1) << id;
    r.ticket = std::to_string(granted.elements.at(1).integer);
    r.before = server_ms();
    EXPECT_EQ(
        run({"release", id, r.ticket, std::to_string(receipt_ms)}, lease).elements.at(0).integer, 1)
        << id;
    r.after = server_ms();
    return r;
  }
  /// The buckets of semaphore `name`: key -> its fields.
  std::map<std::string, std::vector<std::string>> buckets(const std::string& name = "r") {
    std::map<std::string, std::vector<std::string>> out;
    for (const Reply& k : admin_.command({"KEYS", key(name, "receipts:*")}).elements) {
      for (const Reply& f : admin_.command({"HKEYS", k.str}).elements) out[k.str].push_back(f.str);
    }
    return out;
  }
  /// The bucket of `name` that expires at `expires_at`, ms of the server clock.
  std::string bucket(const std::string& name, long long expires_at) {
    return key(name, "receipts:" + std::to_string(expires_at));
  }
  /// When bucket `k` expires, by its name.
  static long long named_expiry(const std::string& k) {
    return std::stoll(k.substr(k.rfind(':') + 1));
  }
  /// Checks that bucket `k` expires when its name says: to the ms where PEXPIRETIME exists
  /// (Redis 7, Valkey), else by a TTL that is there.
  void expect_expiry_as_named(const std::string& k) {
    if (has_functions()) {
      EXPECT_EQ(integer({"PEXPIRETIME", k}), named_expiry(k)) << k;
    } else {
      EXPECT_GT(integer({"PTTL", k}), 0) << k;
    }
  }
  /// The bucket of `name` holding `field`, or "".
  std::string bucket_of(const std::string& name, const std::string& field) {
    for (const auto& [k, fields] : buckets(name)) {
      for (const std::string& f : fields) {
        if (f == field) return k;
      }
    }
    return "";
  }
  std::vector<std::string> keys_of(const std::string& name) {
    std::vector<std::string> out;
    for (const Reply& k : admin_.command({"KEYS", prefix_ + ":{" + name + "}:*"}).elements) {
      out.push_back(k.str);
    }
    return out;
  }

  detail::Connection conn_{test::redis_options()};
};

// 40 permits released one after another, each with its own retry budget (11 to 50 s): each
// receipt is in the bucket of when it may go, which expires after it may go and within one
// bucket's time of it (4,096 ms), as its name says. No key per release: the counter, meta and
// a few buckets are all there is. A release run again is told "released earlier".
TEST_F(ReceiptsTest, EachReceiptIsInTheBucketOfWhenItMayGoWhichExpiresAfterIt) {
  long long first_due = 0;
  long long last_due = 0;
  for (int i = 1; i <= 40; ++i) {
    const std::string id = "p" + std::to_string(i);
    const long long lifetime = 10000 + 1000L * i;
    const Released r = pair(id, lifetime, "60000");
    const std::string k = bucket_of("r", id + ":" + r.ticket);
    ASSERT_NE(k, "") << id << "'s receipt is missing";
    EXPECT_EQ(named_expiry(k) % kBucketMs, 0) << k;
    EXPECT_GE(named_expiry(k), r.before + lifetime) << id;
    EXPECT_LE(named_expiry(k), r.after + lifetime + kBucketMs) << id;
    expect_expiry_as_named(k);
    EXPECT_EQ(
        run({"release", id, r.ticket, std::to_string(lifetime)}, "60000").elements.at(0).integer, 3)
        << id;
    if (i == 1) first_due = r.before + lifetime;
    last_due = r.after + lifetime;
  }
  std::size_t receipts = 0;
  for (const auto& [k, fields] : buckets()) receipts += fields.size();
  EXPECT_EQ(receipts, 40U);
  // One bucket per 4,096 ms from the first receipt's time to the last's, and one more.
  const auto most = static_cast<std::size_t>((last_due - first_due) / kBucketMs + 2);
  EXPECT_LE(buckets().size(), most);
  EXPECT_EQ(keys_of("r").size(), buckets().size() + 2);  // + counter and meta
  EXPECT_THAT(keys_of("r"), Contains(key("r", "counter")));
  EXPECT_THAT(keys_of("r"), Contains(key("r", "meta")));
}

// A retry late in its receipt's lifetime (after 5 of its 6 s, in another bucket than the
// release's time) still finds it.
TEST_F(ReceiptsTest, ARetryLateInTheReceiptsLifetimeStillFindsIt) {
  const Released r = pair("a", 6000);
  ASSERT_TRUE(test::wait_until([&] { return server_ms() >= r.after + 5000; }, 20s));
  EXPECT_EQ(run({"release", "a", r.ticket, "6000"}).elements.at(0).integer, 3);
}

// A receipt goes with its bucket, once the retry budget it was kept for (and the rest of its
// bucket's time) is over: a retry after that is told "not there", as for an expired permit.
TEST_F(ReceiptsTest, AReceiptGoesWithItsBucketAfterItsTime) {
  const Released r = pair("a", 100);
  const std::string k = bucket_of("r", "a:" + r.ticket);
  ASSERT_NE(k, "");
  EXPECT_GE(named_expiry(k), r.before + 100);
  expect_expiry_as_named(k);
  EXPECT_EQ(run({"release", "a", r.ticket, "100"}).elements.at(0).integer, 3);
  ASSERT_TRUE(test::wait_until([&] { return integer({"EXISTS", k}) == 0; }, 20s));
  EXPECT_GE(server_ms(), named_expiry(k));
  EXPECT_EQ(run({"release", "a", r.ticket, "100"}).elements.at(0).integer, 0);
}

// However many receipts there are, live or past their time, a release makes the same calls:
// two releases, one with none and one after 2,000 others, send Redis the same commands.
TEST_F(ReceiptsTest, AReleaseCostsTheSameCallsWhateverTheHistory) {
  // A server of its own: INFO commandstats counts every client's commands, and another test
  // may flush the scripts (a reload would count too).
  test::RedisServer server;
  detail::Connection conn(server.options());
  detail::Connection admin(server.options());
  const auto ticket_of = [&](const std::string& id) {
    const Reply granted = run_op(conn, "r", {"acquire", id, "try", "o"}, "1", "60000");
    EXPECT_EQ(granted.elements.at(0).integer, 1) << id;
    return std::to_string(granted.elements.at(1).integer);
  };
  const auto release = [&](const std::string& id, const std::string& ticket,
                           const std::string& receipt_ms) {
    EXPECT_EQ(
        run_op(conn, "r", {"release", id, ticket, receipt_ms}, "1", "60000").elements.at(0).integer,
        1)
        << id;
  };
  const auto commands_of_a_release = [&](const std::string& id) {
    const std::string ticket = ticket_of(id);
    admin.command({"CONFIG", "RESETSTAT"});
    release(id, ticket, "60000");
    std::string stats = admin.command({"INFO", "commandstats"}).str;
    std::vector<std::string> out;
    for (std::size_t at = stats.find("cmdstat_"); at != std::string::npos;
         at = stats.find("cmdstat_", at + 1)) {
      const std::string line = stats.substr(at, stats.find(",usec=", at) - at);
      if (line.find("cmdstat_info:") != 0) out.push_back(line);
    }
    return out;
  };
  // The scripts loaded first: a first call of each loads it.
  release("warm", ticket_of("warm"), "60000");
  const std::vector<std::string> fresh = commands_of_a_release("first");
  // 1,000 receipts past their time at once (kept 0 ms), then 1,000 kept a minute.
  for (int i = 0; i < 1000; ++i) {
    const std::string id = "s" + std::to_string(i);
    release(id, ticket_of(id), "0");
  }
  for (int i = 0; i < 1000; ++i) {
    const std::string id = "h" + std::to_string(i);
    release(id, ticket_of(id), "60000");
  }
  EXPECT_EQ(commands_of_a_release("later"), fresh);
  EXPECT_THAT(fresh, Contains("cmdstat_pexpireat:calls=1"));
}

// A receipt kept 30 days (a lease that long) goes to a bucket 3.1 days wide, not one of
// 600,000 of 4,096 ms; a retry finds it, and a release that finds no receipt looks in at most
// 18 buckets, whatever the lifetime.
TEST_F(ReceiptsTest, ALongLifetimeHasWideBucketsAndALookThatStaysShort) {
  const std::string month = std::to_string(kThirtyDaysMs);
  const Released r = pair("a", kThirtyDaysMs, month);
  const std::string k = bucket_of("r", "a:" + r.ticket);
  ASSERT_NE(k, "");
  EXPECT_EQ(named_expiry(k) % kThirtyDayBucketMs, 0) << k;
  EXPECT_GE(named_expiry(k), r.before + kThirtyDaysMs);
  EXPECT_LE(named_expiry(k), r.after + kThirtyDaysMs + kThirtyDayBucketMs);
  expect_expiry_as_named(k);
  EXPECT_EQ(run({"release", "a", r.ticket, month}, month).elements.at(0).integer, 3);
  // The look's calls, on a server of its own (INFO commandstats counts every client's).
  test::RedisServer server;
  detail::Connection conn(server.options());
  detail::Connection admin(server.options());
  (void)run_op(conn, "r", {"release", "b", "7", "0"}, "1", month);  // loads the script
  for (const std::string& lifetime : {month, std::string("51000"), std::string("0")}) {
    admin.command({"CONFIG", "RESETSTAT"});
    EXPECT_EQ(run_op(conn, "r", {"release", "b", "7", lifetime}, "1", month).elements.at(0).integer,
              0);
    const std::string stats = admin.command({"INFO", "commandstats"}).str;
    const auto at = stats.find("cmdstat_hget:calls=");
    ASSERT_NE(at, std::string::npos) << lifetime;
    const long long hgets = std::stoll(stats.substr(at + 19));
    EXPECT_GE(hgets, 2) << lifetime;
    EXPECT_LE(hgets, 18) << lifetime;
  }
}

// A receipt is for one permit, its id and its ticket: a later permit of the same id, or
// another id with the same ticket, is not taken for it.
TEST_F(ReceiptsTest, AReceiptNamesTheIdAndTheTicket) {
  const Reply granted = run({"acquire", "a", "try", "o"}, "60000");
  ASSERT_EQ(granted.elements.at(0).integer, 1);
  const std::string ticket = std::to_string(granted.elements.at(1).integer);
  const std::string later = std::to_string(granted.elements.at(1).integer + 1);
  ASSERT_EQ(run({"release", "a", ticket, "60000"}, "60000").elements.at(0).integer, 1);
  ASSERT_EQ(buckets().size(), 1U);
  EXPECT_EQ(buckets().begin()->second, std::vector<std::string>{"a:" + ticket});
  EXPECT_EQ(run({"release", "a", ticket, "60000"}, "60000").elements.at(0).integer, 3);
  EXPECT_EQ(run({"release", "a", later, "60000"}, "60000").elements.at(0).integer, 0);
  EXPECT_EQ(run({"release", "b", ticket, "60000"}, "60000").elements.at(0).integer, 0);
}

// A release whose ticket or receipt time is not an integer (a client's bug, another program)
// is refused with an error that names them, before anything is written.
TEST_F(ReceiptsTest, AGarbledTicketOrReceiptTimeIsRefusedWithNothingWritten) {
  const Reply granted = run({"acquire", "a", "try", "o"}, "60000");
  ASSERT_EQ(granted.elements.at(0).integer, 1);
  const std::string ticket = std::to_string(granted.elements.at(1).integer);
  const auto before = snapshot();
  for (const Args& bad :
       {Args{"release", "a", "1", "sixty"}, Args{"release", "a", "1"},
        Args{"release", "a", "1", "-1"}, Args{"release", "a", "1", "1.5"},
        Args{"release", "a", "one", "60000"}, Args{"release", "a", "1", "1099511627777"}}) {
    try {
      run(bad, "60000");
      ADD_FAILURE() << "accepted: " << bad.size() << " arguments";
    } catch (const ReplyError& e) {
      EXPECT_THAT(e.server_message(), HasSubstr("release needs TICKET (an integer) and "
                                                "RECEIPT_MS (whole ms, 0 to 1099511627776)"));
    }
  }
  EXPECT_EQ(snapshot(), before);
  EXPECT_EQ(run({"release", "a", ticket, "60000"}, "60000").elements.at(0).integer, 1);
}

// A key of another type where a receipt goes costs only the receipt: the release frees the
// permit, leaves the key alone, and a retry is told "not there" rather than "released".
TEST_F(ReceiptsTest, AForeignKeyInABucketsPlaceCostsOnlyTheReceipt) {
  const Reply granted = run({"acquire", "a", "try", "o"}, "60000");
  ASSERT_EQ(granted.elements.at(0).integer, 1);
  const std::string ticket = std::to_string(granted.elements.at(1).integer);
  // Every bucket that the release, and the retry's look, can reach in the next 10 s.
  const long long from = (server_ms() / kBucketMs + 1) * kBucketMs;
  const long long to = ((server_ms() + 70000) / kBucketMs + 2) * kBucketMs;
  for (long long e = from; e <= to; e += kBucketMs) {
    admin_.command({"SET", bucket("r", e), "not fairsem's"});
  }
  EXPECT_EQ(run({"release", "a", ticket, "60000"}, "60000").elements.at(0).integer, 1);
  EXPECT_EQ(run({"release", "a", ticket, "60000"}, "60000").elements.at(0).integer, 0);
  for (long long e = from; e <= to; e += kBucketMs) {
    EXPECT_EQ(admin_.command({"GET", bucket("r", e)}).str, "not fairsem's");
    EXPECT_EQ(integer({"PTTL", bucket("r", e)}), -1);
  }
  EXPECT_EQ(integer({"EXISTS", key("r", "owner")}), 0);
}

// A semaphore with an idle expiry leaves nothing behind for good, the receipts included; but
// they outlive its other keys for as long as a retry of the release may ask for them.
TEST_F(ReceiptsTest, WithAnIdleExpiryTheReceiptsOutliveTheOtherKeysAndThenGo) {
  SemaphoreOptions o = options(1, 300ms);
  o.idle_expiry = 300ms;
  o.auto_renew = false;
  // A retry budget of about 5 s (51 s by default): the receipt lives that long.
  ConnectionOptions c = test::redis_options();
  c.command_timeout = 1s;
  c.reconnect_attempts = 1;
  c.reconnect_backoff_max = 200ms;
  c.connect_timeout = 500ms;
  FairSemaphore sem(c, "expiring", o);
  std::optional<Permit> p = sem.try_acquire();
  ASSERT_TRUE(p);
  const std::string member = p->id() + ":" + std::to_string(p->fencing_token());
  const long long released_at = server_ms();
  ASSERT_EQ(p->release(), ReleaseResult::released);
  ASSERT_EQ(buckets("expiring").size(), 1U);
  const std::string k = buckets("expiring").begin()->first;
  EXPECT_EQ(buckets("expiring").begin()->second, std::vector<std::string>{member});
  // Every other key goes between 300 and 450 ms after the last acquire; the receipt stays
  // until its time (the client's retry budget, at least a lease, after the release), and then
  // goes too.
  ASSERT_TRUE(test::wait_until([&] { return keys_of("expiring").size() == 1; }, 10s))
      << ::testing::PrintToString(keys_of("expiring"));
  EXPECT_EQ(keys_of("expiring"), std::vector<std::string>{k});
  EXPECT_GT(named_expiry(k), released_at + 5000);
  expect_expiry_as_named(k);
  ASSERT_TRUE(test::wait_until([&] { return keys_of("expiring").empty(); }, 30s));
}

}  // namespace
}  // namespace fairsem
