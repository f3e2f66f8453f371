// SemaphoreOptions::idle_expiry, keys that clean up after themselves: every key of a semaphore
// nobody holds or waits on expires (10,000 semaphores used once leave an empty server), no key
// of a semaphore in use is ever without its expiry, a holder and a waiter keep theirs alive for
// many idle times, fencing tokens keep increasing across an expiry, a semaphore that expired is
// a new one (its old limit forgotten), the first client's value is stored and another one
// refused, a refused acquire writes nothing, a key made in the keys' last millisecond lives
// with the others, and bad values are refused before anything is sent.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "key_expiry.hpp"
#include "redis_server.hpp"
#include "semaphore_fixture.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using detail::Connection;
using test::keys_without_expiry;
using test::wait_until;

class IdleExpiryTest : public test::SemaphoreFixture {
 protected:
  SemaphoreOptions expiring(long long limit, std::chrono::milliseconds idle,
                            std::chrono::milliseconds lease = 1s) {
    SemaphoreOptions o = options(limit, lease);
    o.idle_expiry = idle;
    return o;
  }
  /// How many of the semaphore's own keys (not release receipts, which expire after the
  /// client's retry budget, nor wake lists) exist.
  long long keys_of(const std::string& name) {
    const std::vector<std::string> keys = script_keys(name);
    long long n = 0;
    for (const std::size_t i : {0U, 1U, 2U, 3U, 4U, 7U, 8U}) {
      n += admin_.command({"EXISTS", keys.at(i)}).integer;
    }
    return n;
  }
  /// The keys of `name` left, each with its PTTL, for a failure's message.
  std::string left(const std::string& name) {
    std::string out;
    for (const auto& k : admin_.command({"KEYS", prefix_ + ":{" + name + "}:*"}).elements) {
      out += k.str + " (PTTL " + std::to_string(admin_.command({"PTTL", k.str}).integer) + ") ";
    }
    return out;
  }

  Client client_{test::redis_options()};
};

TEST_F(IdleExpiryTest, TenThousandSemaphoresUsedOnceLeaveNoKeyAfterTheIdleTime) {
  test::RedisServer server;
  Connection admin(server.options());
  // A retry budget of a few seconds: release receipts live that long (51 s by default).
  ConnectionOptions c = server.options();
  c.command_timeout = 1s;
  c.reconnect_attempts = 1;
  c.reconnect_backoff_max = 200ms;
  c.connect_timeout = 500ms;
  Client client(c);
  // Nothing is removed while the semaphores are used (an expired key still counts in DBSIZE),
  // so that what they left can be counted however long that takes.
  admin.command({"DEBUG", "SET-ACTIVE-EXPIRE", "0"});
  SemaphoreOptions o;
  o.limit = 2;
  o.lease = 1s;
  o.idle_expiry = 1s;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 2500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        FairSemaphore sem(client, "tenant-" + std::to_string(t * kPerThread + i), o);
        sem.acquire().release();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  // 10,000 counters and metas, at least, and each of them, and each receipt, expiring.
  EXPECT_GE(admin.command({"DBSIZE"}).integer, 2 * kThreads * kPerThread);
  EXPECT_EQ(keys_without_expiry(admin, "*"), std::vector<std::string>{});
  admin.command({"DEBUG", "SET-ACTIVE-EXPIRE", "1"});
  EXPECT_TRUE(wait_until([&] { return admin.command({"DBSIZE"}).integer == 0; }, 60s))
      << admin.command({"DBSIZE"}).integer << " keys are left";
}

TEST_F(IdleExpiryTest, NoKeyOfASemaphoreInUseIsEverWithoutItsExpiry) {
  // Each step creates keys another way: the first entry, a waiter, slots going back to the
  // free set, a promotion after the last holder left, a new counter under a holder.
  FairSemaphore sem(client_, "in-use", expiring(3, 20s, 5s));
  const std::string all = prefix_ + ":{in-use}:*";
  std::optional<Permit> a = sem.acquire();
  std::optional<Permit> b = sem.acquire(2);
  EXPECT_EQ(keys_without_expiry(admin_, all), std::vector<std::string>{}) << "holders";
  std::future<Permit> waiter = sem.acquire_async(3);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  EXPECT_EQ(keys_without_expiry(admin_, all), std::vector<std::string>{}) << "a waiter";
  b->release(1);
  EXPECT_EQ(keys_without_expiry(admin_, all), std::vector<std::string>{}) << "a free slot";
  a.reset();
  b.reset();
  ASSERT_EQ(waiter.wait_for(30s), std::future_status::ready);
  Permit all_three = waiter.get();
  EXPECT_EQ(keys_without_expiry(admin_, all), std::vector<std::string>{}) << "a promotion";
  admin_.command({"DEL", key("in-use", "counter")});
  all_three.release();
  std::optional<Permit> again = sem.acquire();
  EXPECT_EQ(keys_without_expiry(admin_, all), std::vector<std::string>{}) << "a new counter";
  // Set back behind the newest ticket under a holder: the acquire sets it again.
  admin_.command({"SET", key("in-use", "counter"), "1"});
  Permit one_more = sem.acquire();
  EXPECT_GT(one_more.fencing_token(), again->fencing_token());
  EXPECT_EQ(keys_without_expiry(admin_, all), std::vector<std::string>{}) << "a counter set back";
}

TEST_F(IdleExpiryTest, AHolderAndAWaiterKeepTheirSemaphoreAliveForManyIdleTimes) {
  // Keys expire 0.75 s after the last acquire or renewal; the holder holds for eight times
  // that alone (renewing every lease / 3), then eight times more with a waiter behind it.
  FairSemaphore sem(client_, "kept", expiring(1, 500ms, 500ms));
  const auto expires = [&] {
    const detail::Reply r = admin_.command({"HGET", key("kept", "meta"), "expires"});
    return r.str.empty() ? 0LL : std::stoll(r.str);
  };
  std::optional<Permit> holder = sem.acquire();
  const long long first = expires();
  ASSERT_GT(first, 0);
  // Pushed on again and again: 4 s of the server's clock beyond the first expiry.
  ASSERT_TRUE(wait_until([&] { return expires() > first + 4000; }, 60s)) << left("kept");
  EXPECT_FALSE(holder->lost());
  std::future<Permit> waiter = sem.acquire_async();
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  const long long second = expires();
  ASSERT_TRUE(wait_until([&] { return expires() > second + 4000; }, 60s)) << left("kept");
  EXPECT_FALSE(holder->lost());
  const Status st = sem.status();
  ASSERT_EQ(st.holders.size(), 1U);
  EXPECT_EQ(st.holders[0].id, holder->id());
  ASSERT_EQ(st.waiters.size(), 1U);
  EXPECT_EQ(waiter.wait_for(0s), std::future_status::timeout) << "the waiter was granted";
  const long long token = holder->fencing_token();
  holder.reset();
  ASSERT_EQ(waiter.wait_for(30s), std::future_status::ready);
  Permit next = waiter.get();
  EXPECT_GT(next.fencing_token(), token);
  next.release();
  EXPECT_TRUE(wait_until([&] { return keys_of("kept") == 0; }, 30s)) << left("kept");
}

TEST_F(IdleExpiryTest, TokensAfterTheKeysExpireExceedEveryEarlierToken) {
  long long newest = 0;
  {
    FairSemaphore sem(client_, "again", expiring(3, 1s));
    for (int i = 0; i < 5; ++i) {
      Permit p = sem.acquire(1 + i % 3);
      newest = std::max(newest, p.fencing_token());
    }
  }
  ASSERT_TRUE(wait_until([&] { return keys_of("again") == 0; }, 30s)) << left("again");
  // Gone, its limit with it: opened with another one, it is a new semaphore.
  FairSemaphore sem(client_, "again", expiring(5, 1s));
  Permit p = sem.acquire(5);
  EXPECT_GT(p.fencing_token(), newest);
  EXPECT_EQ(sem.status().limit, 5);
}

TEST_F(IdleExpiryTest, TheFirstClientsExpiryIsStoredAnotherRefusedAndZeroFollowsIt) {
  FairSemaphore first(client_, "stored", expiring(2, 20s));
  EXPECT_EQ(admin_.command({"HGET", key("stored", "meta"), "expiry"}).str, "20000");
  const auto before = snapshot();
  try {
    FairSemaphore other(client_, "stored", expiring(2, 30s));
    FAIL() << "opened with another idle_expiry";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("opened with idle_expiry 30000 ms, but Redis stores "
                                         "idle_expiry 20000 ms"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(snapshot(), before);
  // A client without an expiry follows the stored one: its permits keep the keys expiring.
  FairSemaphore follower(client_, "stored", options(2));
  Permit p = follower.acquire();
  EXPECT_EQ(keys_without_expiry(admin_, prefix_ + ":{stored}:*"), std::vector<std::string>{});
  p.release();

  // A semaphore without an expiry gets one from the first client that asks for it.
  FairSemaphore plain(client_, "plain", options(1));
  plain.acquire().release();
  EXPECT_EQ(admin_.command({"PTTL", key("plain", "counter")}).integer, -1);
  FairSemaphore adopting(client_, "plain", expiring(1, 20s));
  EXPECT_EQ(keys_without_expiry(admin_, prefix_ + ":{plain}:*"), std::vector<std::string>{});
  EXPECT_GT(admin_.command({"PTTL", key("plain", "counter")}).integer, 0);
}

TEST_F(IdleExpiryTest, ARefusedAcquireWritesNothingNotEvenTheExpirysPush) {
  SemaphoreOptions o = expiring(1, 20s, 10s);
  o.auto_renew = false;  // no renew to push the expiry on
  FairSemaphore sem(client_, "refused-push", o);
  Permit held = sem.acquire();
  // Make the push due: meta says the keys expire now.
  const detail::Reply time = admin_.command({"TIME"});
  const long long now_ms =
      std::stoll(time.elements.at(0).str) * 1000 + std::stoll(time.elements.at(1).str) / 1000;
  admin_.command({"HSET", key("refused-push", "meta"), "expires", std::to_string(now_ms)});
  const auto before = snapshot();
  EXPECT_FALSE(sem.try_acquire().has_value());
  EXPECT_EQ(snapshot(), before) << "a failed try wrote";
  // An acquire that writes a deadline pushes it on.
  held.release();
  std::optional<Permit> granted = sem.try_acquire();
  ASSERT_TRUE(granted.has_value());
  EXPECT_GE(std::stoll(admin_.command({"HGET", key("refused-push", "meta"), "expires"}).str),
            now_ms + 20000);
}

TEST_F(IdleExpiryTest, AKeyMadeInTheKeysLastMillisecondLivesWithTheOthers) {
  SemaphoreOptions o = expiring(2, 20s, 10s);
  o.auto_renew = false;  // nothing but the release runs
  FairSemaphore sem(client_, "last-ms", o);
  Permit first = sem.acquire();
  Permit second = sem.acquire();
  // The keys' last millisecond as a script sees it: meta's `expires` is the server's clock,
  // while the keys themselves still live (as Redis keeps them through that millisecond).
  const detail::Reply time = admin_.command({"TIME"});
  const long long now_ms =
      std::stoll(time.elements.at(0).str) * 1000 + std::stoll(time.elements.at(1).str) / 1000;
  admin_.command({"HSET", key("last-ms", "meta"), "expires", std::to_string(now_ms)});
  // The release makes `free` (another holder stays): it must not be deleted at once.
  first.release();
  EXPECT_EQ(admin_.command({"EXISTS", key("last-ms", "free")}).integer, 1) << left("last-ms");
  EXPECT_EQ(keys_without_expiry(admin_, prefix_ + ":{last-ms}:*"), std::vector<std::string>{});
  EXPECT_GT(std::stoll(admin_.command({"HGET", key("last-ms", "meta"), "expires"}).str), now_ms);
  // One unit is free: the slot bookkeeping says so.
  EXPECT_TRUE(sem.try_acquire().has_value()) << left("last-ms");
}

TEST_F(IdleExpiryTest, AnExpiryShorterThanTheLeaseOrNegativeIsRefusedBeforeAnythingIsSent) {
  const long long calls_before = script_calls();
  for (const auto idle : {-1ms, 999ms, std::chrono::milliseconds(kMaxIdleExpiry + 1ms)}) {
    try {
      FairSemaphore sem(client_, "refused", expiring(1, idle));
      FAIL() << "idle_expiry " << idle.count() << " ms was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("idle_expiry must be 0 (keys never expire) or from "
                                           "the lease (1000 ms)"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(keys_of("refused"), 0);
  EXPECT_EQ(script_calls(), calls_before);
}

}  // namespace
}  // namespace fairsem
