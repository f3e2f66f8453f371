// SemaphoreAdmin::list: every semaphore under a key prefix with what it holds and queues, the
// prefix matching itself only and the glob filtering names, past one SCAN reply's worth of
// keys; the idle time where the server keeps it (CLIENT NO-TOUCH: Redis 7.2+, Valkey) growing
// while nothing uses the semaphore, not reset by listing, and zero once it is used; bad
// arguments refused before anything is sent; how long each waiter has waited.

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <future>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "redis_server.hpp"
#include "semaphore_fixture.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using test::wait_until;

class ListingTest : public test::SemaphoreFixture {
 protected:
  std::vector<SemaphoreListing> list(const std::string& match = "*") {
    return SemaphoreAdmin::list(client_, prefix_, match);
  }
  static std::vector<std::string> names(const std::vector<SemaphoreListing>& found) {
    std::vector<std::string> out;
    for (const SemaphoreListing& l : found) out.push_back(l.name);
    return out;
  }
  /// Whether the server can read access times without a read counting as one.
  static bool keeps_idle_time() {
    const ServerInfo info = probe_server(test::redis_options(), 1);
    if (info.server_name == "valkey") return true;
    const int major = std::stoi(info.server_version);
    const int minor = std::stoi(info.server_version.substr(info.server_version.find('.') + 1));
    return major > 7 || (major == 7 && minor >= 2);
  }

  Client client_{test::redis_options()};
};

TEST_F(ListingTest, ListsEverySemaphoreUnderThePrefixWithItsHoldersAndWaiters) {
  FairSemaphore busy(client_, "busy", options(3));
  Permit two = busy.acquire(2);
  Permit one = busy.acquire(1);
  std::future<Permit> queued = busy.acquire_async(2);
  ASSERT_TRUE(wait_until([&] { return busy.status().waiters.size() == 1; }));
  FairSemaphore used(client_, "used", options(1));
  used.acquire().release();
  // Not under this prefix: never listed.
  SemaphoreOptions elsewhere = options(1);
  elsewhere.key_prefix = prefix_ + "x";
  FairSemaphore other(client_, "busy", elsewhere);
  Permit other_permit = other.acquire();

  const std::vector<SemaphoreListing> found = list();
  ASSERT_EQ((std::vector<std::string>{"busy", "used"}), names(found));
  const SemaphoreListing& b = found[0];
  EXPECT_EQ(3, b.status.limit);
  ASSERT_EQ(2u, b.status.holders.size());
  EXPECT_EQ(2, b.status.holders[0].count);
  ASSERT_EQ(1u, b.status.waiters.size());
  EXPECT_EQ(2, b.status.waiters[0].count);
  EXPECT_EQ(two.fencing_token() + 2, b.status.last_ticket);
  ASSERT_TRUE(b.idle.has_value());  // in use: idle for 0 s, wherever it is known
  EXPECT_EQ(0s, *b.idle);
  EXPECT_EQ(detail::Connection(test::redis_options()).endpoint(), b.node);
  const SemaphoreListing& u = found[1];
  EXPECT_EQ(1, u.status.limit);
  EXPECT_TRUE(u.status.holders.empty());
  EXPECT_TRUE(u.status.waiters.empty());
  EXPECT_GT(u.status.last_ticket, 1000000000000000LL);  // the server's clock times 1024

  EXPECT_EQ((std::vector<std::string>{"used"}), names(list("u*")));
  EXPECT_EQ((std::vector<std::string>{"busy"}), names(list("b?s[xy]")));
  EXPECT_TRUE(list("nothing*").empty());
  one.release();
  two.release();
  EXPECT_EQ(ReleaseResult::released, queued.get().release());
}

TEST_F(ListingTest, AWaitersTimeInTheQueueIsReportedByTheServersClockAndGrows) {
  FairSemaphore sem(client_, "queue", options(1));
  Permit holder = sem.acquire();
  const auto before = std::chrono::steady_clock::now();
  std::future<Permit> waiter = sem.acquire_async();
  const auto waited = [&]() -> std::optional<std::chrono::milliseconds> {
    const std::vector<SemaphoreListing> found = list();
    if (found.empty() || found[0].status.waiters.empty()) return std::nullopt;
    EXPECT_FALSE(found[0].status.holders.at(0).waited.has_value()) << "a holder has a wait";
    return found[0].status.waiters[0].waited;
  };
  ASSERT_TRUE(wait_until([&] { return waited().value_or(0ms) >= 300ms; }))
      << "the waiter's wait is not known, or does not grow";
  // Not more than the time since the request was made (1 s for the clocks' difference: the
  // server's wall clock against this process's steady one).
  const auto elapsed = std::chrono::steady_clock::now() - before;
  EXPECT_LE(*waited(), elapsed + 1s);
  holder.release();
  EXPECT_EQ(ReleaseResult::released, waiter.get().release());
}

TEST_F(ListingTest, ThePrefixMatchesOnlyItselfNotAsAGlob) {
  const std::string glob_prefix = prefix_ + "*";
  SemaphoreOptions o = options(1);
  o.key_prefix = prefix_ + "abc";
  FairSemaphore(client_, "under-abc", o).acquire().release();
  o.key_prefix = glob_prefix;
  FairSemaphore(client_, "under-star", o).acquire().release();

  EXPECT_EQ((std::vector<std::string>{"under-star"}),
            names(SemaphoreAdmin::list(client_, glob_prefix)));
  EXPECT_TRUE(list().empty());  // neither is under prefix_ itself
}

TEST_F(ListingTest, ListsPastWhatOneScanReplyHolds) {
  constexpr int kCount = 2500;  // the listing asks SCAN for 1000 keys at a time
  for (int i = 0; i < kCount; ++i) {
    FairSemaphore sem(client_, "n" + std::to_string(10000 + i), options(1));
  }
  const std::vector<SemaphoreListing> found = list();
  ASSERT_EQ(static_cast<std::size_t>(kCount), found.size());
  for (int i = 0; i < kCount; ++i) {
    ASSERT_EQ("n" + std::to_string(10000 + i), found[static_cast<std::size_t>(i)].name);
  }
}

TEST_F(ListingTest, IdleTimeGrowsWhileUnusedIsNotResetByListingAndRestartsOnUse) {
  FairSemaphore sem(client_, "idle", options(1));
  sem.acquire().release();
  const auto idle = [&]() -> std::optional<std::chrono::seconds> {
    const std::vector<SemaphoreListing> found = list();
    EXPECT_EQ(1u, found.size());
    return found.empty() ? std::nullopt : found[0].idle;
  };
  if (!keeps_idle_time()) {
    EXPECT_FALSE(idle().has_value()) << "a server without CLIENT NO-TOUCH";
    return;
  }
  // Listed again and again while it idles: the listing's reads do not count as uses.
  ASSERT_TRUE(wait_until([&] { return idle().value_or(0s) >= 2s; }, 10s));
  sem.acquire().release();
  const std::optional<std::chrono::seconds> after_use = idle();
  ASSERT_TRUE(after_use.has_value());
  EXPECT_LT(*after_use, 2s);
}

// A hung server (SIGSTOP) answers nothing: the listing gives up at its time limit, and says
// which limit passed. The command timeout is an hour: were the limit not applied to each call,
// the test would outlast ctest's timeout.
TEST_F(ListingTest, AListingThatOutlivesItsTimeLimitEndsWithATimeoutError) {
  test::RedisServer server;
  ConnectionOptions o = server.options();
  o.command_timeout = 1h;
  Client client(o);
  FairSemaphore(client, "before-the-hang", options(1)).acquire().release();
  ASSERT_EQ(0, ::kill(server.pid(), SIGSTOP));
  std::string message;
  try {
    SemaphoreAdmin::list(client, prefix_, "*", 300ms);
  } catch (const TimeoutError& e) {
    message = e.what();
  }
  ::kill(server.pid(), SIGCONT);
  EXPECT_NE(std::string::npos, message.find("time limit of 300 ms")) << message;
  EXPECT_EQ(1u, SemaphoreAdmin::list(client, prefix_).size());  // and after it, all is well
}

TEST_F(ListingTest, ABadPrefixOrMatchIsRefusedNamingIt) {
  const auto refusal = [&](const std::string& prefix, const std::string& match) -> std::string {
    try {
      SemaphoreAdmin::list(client_, prefix, match);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "(nothing thrown)";
  };
  EXPECT_NE(std::string::npos, refusal("a{b", "*").find("key_prefix"));
  EXPECT_NE(std::string::npos, refusal(prefix_, "x}").find("match pattern"));
  EXPECT_NE(std::string::npos, refusal(prefix_, "").find("match pattern"));
  try {
    SemaphoreAdmin::list(client_, prefix_, "*", 0ms);
    ADD_FAILURE() << "a time limit of 0 ms was taken";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string::npos, std::string(e.what()).find("time limit")) << e.what();
  }
}

}  // namespace
}  // namespace fairsem
