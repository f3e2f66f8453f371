// FairSemaphore against a real redis-server: FIFO order, one script call per operation, wake-ups
// of exactly the promoted waiter, renewal, lost permits, NOSCRIPT, limit agreement, bad input
// and clean give-up. Multi-process guarantees live in process_test.cpp, lost replies in
// lost_reply_test.cpp.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "fairsem/fairsem.hpp"
#include "fairsem/impl/connection.hpp"
#include "fairsem/impl/scripts.hpp"
#include "redis_server.hpp"
#include "semaphore_fixture.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using detail::Connection;
using detail::Reply;
using test::BackgroundWaiter;
using test::redis_options;
using test::wait_until;

/// True for the SHA1 of one of the semaphore's scripts (one per operation).
bool is_semaphore_script(const std::string& sha) {
  return std::any_of(detail::scripts::semaphore_scripts.begin(),
                     detail::scripts::semaphore_scripts.end(),
                     [&](const detail::Script* script) { return script->sha1 == sha; });
}

class SemaphoreTest : public test::SemaphoreFixture {};

TEST_F(SemaphoreTest, GrantsUpToTheLimitAndNoMore) {
  FairSemaphore sem(redis_options(), "up-to-limit", options(2));
  auto a = sem.try_acquire();
  auto b = sem.try_acquire();
  auto c = sem.try_acquire();
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(c);
  EXPECT_NE(a->id(), b->id());
  EXPECT_LT(a->fencing_token(), b->fencing_token());
  EXPECT_EQ(ReleaseResult::released, a->release());
  EXPECT_FALSE(a->held());
  EXPECT_EQ(ReleaseResult::already_released, a->release());
  EXPECT_TRUE(sem.try_acquire());
}

TEST_F(SemaphoreTest, PermitDestructorReleasesAndMoveTransfers) {
  FairSemaphore sem(redis_options(), "raii", options(1));
  {
    Permit p = sem.acquire();
    Permit moved = std::move(p);
    EXPECT_FALSE(p.held());  // NOLINT(bugprone-use-after-move): the moved-from state is defined
    EXPECT_TRUE(moved.held());
    EXPECT_EQ(ReleaseResult::already_released, p.release());
    EXPECT_FALSE(sem.try_acquire());
  }
  EXPECT_EQ(0, integer({"ZCARD", key("raii", "owner")}));
  auto again = sem.try_acquire();
  ASSERT_TRUE(again);
  Permit other;
  other = std::move(*again);
  other = Permit();  // assigning over a held permit releases it
  EXPECT_EQ(0, integer({"ZCARD", key("raii", "owner")}));
}

TEST_F(SemaphoreTest, LeaseDeadlineComesFromTheServerClock) {
  FairSemaphore sem(redis_options(), "server-clock", options(1, 5000ms));
  const auto before = std::chrono::steady_clock::now();
  Permit p = sem.acquire();
  const Reply time = admin_.command({"TIME"});
  const long long server_now =
      std::stoll(time.elements[0].str) * 1000 + std::stoll(time.elements[1].str) / 1000;
  const std::string score = admin_.command({"ZSCORE", key("server-clock", "time"), p.id()}).str;
  // The stored deadline is the server's TIME plus the lease (within the time this took).
  EXPECT_NEAR(static_cast<double>(server_now + 5000), std::stod(score), 2000.0);
  EXPECT_GT(p.deadline(), before);
  EXPECT_LE(p.deadline(), std::chrono::steady_clock::now() + 5000ms);
}

TEST_F(SemaphoreTest, StatusShowsHoldersWaitersAndOwners) {
  SemaphoreOptions o = options(1);
  o.owner_info = "billing-worker-3";
  FairSemaphore sem(redis_options(), "status", o);
  FairSemaphore other(redis_options(), "status", options(1));
  Permit p = sem.acquire();
  std::thread waiter([&] { auto q = other.try_acquire_for(20s); });
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  Status s = sem.status();
  EXPECT_EQ(1, s.limit);
  EXPECT_EQ(2, s.last_ticket);
  ASSERT_EQ(1u, s.holders.size());
  EXPECT_EQ(p.id(), s.holders[0].id);
  EXPECT_EQ(p.fencing_token(), s.holders[0].ticket);
  EXPECT_EQ("billing-worker-3", s.holders[0].owner);
  EXPECT_GT(s.holders[0].lease_left, 0ms);
  EXPECT_LE(s.holders[0].lease_left, 10s);
  // The default owner info is hostname:pid.
  EXPECT_NE(std::string::npos, s.waiters[0].owner.find(":" + std::to_string(::getpid())));
  p.release();
  waiter.join();
}

// Behaviour 2: blocking waiters are granted in ticket order, and fencing tokens grow in grant
// order.
TEST_F(SemaphoreTest, WaitersAreGrantedInTheOrderTheyAsked) {
  FairSemaphore sem(redis_options(), "fifo", options(1));
  Permit first = sem.acquire();
  constexpr int kWaiters = 6;
  std::mutex mu;
  std::vector<int> order;
  std::vector<long long> tokens;
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      Permit p = sem.acquire();
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(i);
      tokens.push_back(p.fencing_token());
    });
    // The next waiter starts only once this one is queued, so tickets follow i.
    ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == std::size_t(i) + 1; }));
  }
  first.release();
  for (auto& t : threads) t.join();
  ASSERT_EQ(std::size_t(kWaiters), order.size());
  for (int i = 0; i < kWaiters; ++i) EXPECT_EQ(i, order[std::size_t(i)]);
  for (std::size_t i = 1; i < tokens.size(); ++i) EXPECT_LT(tokens[i - 1], tokens[i]);
  EXPECT_LT(first.fencing_token(), tokens.front());
}

// Behaviour 2: a try_acquire never overtakes a queued waiter, even in the moment between a
// release and the promoted waiter waking up.
TEST_F(SemaphoreTest, TryAcquireNeverOvertakesAQueuedWaiter) {
  FairSemaphore sem(redis_options(), "no-overtake", options(2));
  Permit a = sem.acquire();
  Permit b = sem.acquire();
  std::atomic<long long> waiter_token{0};
  std::promise<void> let_go;
  std::thread waiter([&, go = let_go.get_future()] {
    Permit p = sem.acquire();
    waiter_token = p.fencing_token();
    go.wait();  // keeps the permit until the test is done looking
  });
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  EXPECT_FALSE(sem.try_acquire());  // full, and someone waits
  a.release();
  // The release promoted the waiter inside the same script: the slot is already taken, whether
  // or not the waiter has woken yet.
  EXPECT_FALSE(sem.try_acquire());
  ASSERT_TRUE(wait_until([&] { return waiter_token.load() != 0; }));
  EXPECT_FALSE(sem.try_acquire());
  let_go.set_value();
  waiter.join();
  EXPECT_GT(waiter_token.load(), b.fencing_token());
}

// Behaviour 3: one script call per acquire attempt and per release, and a release wakes only
// the waiter it promotes.
TEST_F(SemaphoreTest, OneScriptCallPerAcquireAndRelease) {
  FairSemaphore sem(redis_options(), "one-call", options(2));
  sem.status();  // loads the script, so NOSCRIPT plays no part below
  admin_.command({"CONFIG", "RESETSTAT"});
  auto p = sem.try_acquire();
  ASSERT_TRUE(p);
  EXPECT_EQ(1, calls("evalsha"));
  p->release();
  EXPECT_EQ(2, calls("evalsha"));
  Permit q = sem.acquire();
  EXPECT_EQ(3, calls("evalsha"));
  q.release();
  EXPECT_EQ(4, calls("evalsha"));
  EXPECT_EQ(0, calls("eval"));
  EXPECT_EQ(0, calls("brpop"));
}

TEST_F(SemaphoreTest, ReleaseWakesExactlyThePromotedWaiter) {
  // A long lease makes the waiters' poll interval (lease / 3) 20 s: within this test a waiter
  // can only move because it was woken.
  FairSemaphore sem(redis_options(), "wake-one", options(1, 60s));
  Permit holder = sem.acquire();
  constexpr int kWaiters = 3;
  std::promise<void> let_go;
  std::shared_future<void> go = let_go.get_future().share();
  std::vector<std::thread> threads;
  std::vector<std::atomic<bool>> granted(kWaiters);
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      Permit p = sem.acquire();
      granted[std::size_t(i)] = true;
      go.wait();
    });
    ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == std::size_t(i) + 1; }));
  }
  // The waiters' wake lists are all in the one BRPOP of the Client's waker.
  auto blocked = [&](int n) {
    return admin_.command({"INFO", "clients"}).str.find("blocked_clients:" + std::to_string(n)) !=
           std::string::npos;
  };
  ASSERT_TRUE(wait_until([&] { return blocked(1); }));
  const std::vector<PermitInfo> waiters = sem.status().waiters;
  // Every script call from here on, by its SHA: a waiter's push to the waker's kick list (the
  // kick script) may still come after it queued, and is not a semaphore operation.
  admin_.command({"CONFIG", "SET", "slowlog-log-slower-than", "0"});
  admin_.command({"SLOWLOG", "RESET"});
  holder.release();
  ASSERT_TRUE(wait_until([&] { return granted[0].load(); }, 10s));
  std::vector<std::string> operations;  // the semaphore script's operations, in order
  for (const Reply& entry : admin_.command({"SLOWLOG", "GET", "-1"}).elements) {
    const auto& argv = entry.elements.at(3).elements;
    if (argv.size() > 4 && (argv[0].str == "EVALSHA" || argv[0].str == "evalsha") &&
        is_semaphore_script(argv[1].str)) {
      operations.push_back(argv[3 + std::stoul(argv[2].str)].str);
    }
  }
  admin_.command({"CONFIG", "SET", "slowlog-log-slower-than", "10000"});
  // Only the release ran the semaphore script: the woken waiter took its grant from the
  // wake-up itself, nobody else ran it, and the waker waits on for the other two.
  ASSERT_EQ(operations.size(), 1u);
  EXPECT_EQ(operations[0], "release");
  EXPECT_FALSE(granted[1]);
  EXPECT_FALSE(granted[2]);
  EXPECT_TRUE(wait_until([&] { return blocked(1); }));
  for (const PermitInfo& w : waiters) {
    EXPECT_EQ(0, integer({"EXISTS", key("wake-one", "wake:" + w.id)})) << w.id;
  }
  let_go.set_value();
  for (auto& t : threads) t.join();
  EXPECT_TRUE(granted[1] && granted[2]);
}

// Behaviour 5: a permit held for 5x its lease stays held, with one renew call per interval
// for all the permits of the process.
TEST_F(SemaphoreTest, HolderKeepsItsPermitThroughBatchedRenewals) {
  // Generous: the watchdog may be starved for up to 2/3 of a lease on a loaded machine.
  const auto lease = 1200ms;
  SemaphoreOptions o = options(3, lease);
  FairSemaphore sem(redis_options(), "renew", o);
  FairSemaphore outsider(redis_options(), "renew", options(3, lease));
  std::vector<Permit> permits;
  for (int i = 0; i < 3; ++i) permits.push_back(sem.acquire());
  admin_.command({"CONFIG", "RESETSTAT"});
  const auto start = std::chrono::steady_clock::now();
  const auto until = start + 5 * lease;
  long long outsider_tries = 0;
  while (std::chrono::steady_clock::now() < until) {
    ++outsider_tries;
    ASSERT_FALSE(outsider.try_acquire()) << "a permit expired while its holder renewed it";
    std::this_thread::sleep_for(lease / 4);  // the workload: holding for 5 leases
  }
  const long long renewals = calls("evalsha") - outsider_tries;
  const auto elapsed = std::chrono::steady_clock::now() - start;
  for (const Permit& p : permits) EXPECT_FALSE(p.lost());
  const long long intervals = elapsed / o.effective_renew_interval();
  // At most one renew call per interval for all three permits (separate renewals would make
  // three), and at least one, or the permits could not have outlived their lease.
  EXPECT_LE(renewals, intervals + 1);
  EXPECT_GE(renewals, 1);
  EXPECT_EQ(3u, sem.status().holders.size());
}

// Behaviour 5: renewals above the chunk size still reach every permit.
TEST_F(SemaphoreTest, ThousandsOfPermitsAllStayRenewed) {
  constexpr int kPermits = 2100;  // more than one renew chunk
  const auto lease = 3000ms;
  FairSemaphore sem(redis_options(), "many", options(kPermits, lease));
  std::vector<Permit> permits;
  permits.reserve(kPermits);
  for (int i = 0; i < kPermits; ++i) permits.push_back(std::move(*sem.try_acquire()));
  // Hold for two leases: without renewals every permit would be gone.
  const auto until = std::chrono::steady_clock::now() + 2 * lease;
  while (std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(50ms);
  int lost = 0;
  for (const Permit& p : permits) lost += p.lost() ? 1 : 0;
  EXPECT_EQ(0, lost);
  EXPECT_EQ(std::size_t(kPermits), sem.status().holders.size());
}

// Behaviour 5: a permit removed behind the holder's back is reported lost; its release says so.
TEST_F(SemaphoreTest, PermitDeletedBehindItsBackIsReportedLost) {
  std::mutex mu;
  std::vector<std::string> lost_ids;
  std::vector<std::string> reasons;
  SemaphoreOptions o = options(1, 600ms);
  o.on_lost = [&](const std::string& id, const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu);
    lost_ids.push_back(id);
    reasons.push_back(reason);
  };
  FairSemaphore sem(redis_options(), "deleted", o);
  Permit p = sem.acquire();
  admin_.command({"DEL", key("deleted", "owner"), key("deleted", "time")});
  ASSERT_TRUE(wait_until([&] { return p.lost(); }));
  // lost() turns true just before on_lost is called, on the watchdog's thread.
  ASSERT_TRUE(wait_until([&] {
    std::lock_guard<std::mutex> lock(mu);
    return !lost_ids.empty();
  }));
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(1u, lost_ids.size());
    EXPECT_EQ(p.id(), lost_ids[0]);
    EXPECT_NE(std::string::npos, reasons[0].find("no longer in Redis"));
  }
  EXPECT_EQ(ReleaseResult::expired, p.release());
}

TEST_F(SemaphoreTest, ManualRenewWithoutWatchdog) {
  SemaphoreOptions o = options(1, 1000ms);
  o.auto_renew = false;
  FairSemaphore sem(redis_options(), "manual", o);
  Permit p = sem.acquire();
  EXPECT_TRUE(p.renew());
  // Without renewals the permit expires after its lease and passes on.
  FairSemaphore other(redis_options(), "manual", options(1, 1000ms));
  auto q = other.try_acquire_for(10s);
  ASSERT_TRUE(q);
  EXPECT_FALSE(p.renew());
  EXPECT_TRUE(p.lost());
  EXPECT_EQ(ReleaseResult::expired, p.release());
  EXPECT_TRUE(q->held());
}

// Behaviour 8: SCRIPT FLUSH between calls changes nothing for the caller.
TEST_F(SemaphoreTest, ScriptFlushIsInvisible) {
  FairSemaphore sem(redis_options(), "noscript", options(1));
  admin_.command({"SCRIPT", "FLUSH"});
  Permit p = sem.acquire();
  admin_.command({"SCRIPT", "FLUSH"});
  EXPECT_EQ(1u, sem.status().holders.size());
  admin_.command({"SCRIPT", "FLUSH"});
  EXPECT_EQ(ReleaseResult::released, p.release());
  admin_.command({"SCRIPT", "FLUSH"});
  EXPECT_TRUE(sem.try_acquire());
}

// Behaviour 9: the first client stores the limit; another limit is refused, changing nothing.
TEST_F(SemaphoreTest, AnotherLimitIsRefusedNamingBothNumbers) {
  FairSemaphore first(redis_options(), "limits", options(3, 60s));
  Permit p = first.acquire();
  const auto before = snapshot();
  try {
    FairSemaphore second(redis_options(), "limits", options(5));
    FAIL() << "opening with another limit must throw";
  } catch (const LimitMismatchError& e) {
    EXPECT_EQ(3, e.stored_limit());
    EXPECT_EQ(5, e.requested_limit());
    const std::string what = e.what();
    EXPECT_NE(std::string::npos, what.find("limit 5")) << what;
    EXPECT_NE(std::string::npos, what.find("limit 3")) << what;
    EXPECT_NE(std::string::npos, what.find("'limits'")) << what;
  }
  EXPECT_EQ(before, snapshot());
  EXPECT_EQ("3", admin_.command({"HGET", key("limits", "meta"), "limit"}).str);
}

// A limit that is not a number is refused by every operation, not only by open.
TEST_F(SemaphoreTest, AStoredLimitThatIsNotANumberIsRefusedAtAcquire) {
  FairSemaphore sem(redis_options(), "limit-later", options(2));
  admin_.command({"HSET", key("limit-later", "meta"), "limit", "seven"});
  EXPECT_THROW((void)sem.try_acquire(), ReplyError);
  EXPECT_EQ(0, integer({"EXISTS", key("limit-later", "owner")}));
}

// Behaviour 10: bad input is refused with InvalidArgument naming the problem, and nothing is
// written to Redis.
TEST_F(SemaphoreTest, BadNamesAreRefused) {
  const long long keys_before = integer({"DBSIZE"});
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "must not be empty"},
      {std::string(201, 'n'), "201 bytes"},
      {"a{b", "'{'"},
      {"a}b", "'}'"},
      {"a b", "whitespace"},
      {"a\tb", "\\x09"},
      {std::string("a\x01") + "b", "\\x01"},
      {"line\n", "\\x0a"},
  };
  for (const auto& [name, expected] : bad) {
    try {
      FairSemaphore sem(redis_options(), name, options(1));
      ADD_FAILURE() << "name \"" << name << "\" was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string::npos, std::string(e.what()).find(expected)) << e.what();
      EXPECT_NE(std::string::npos, std::string(e.what()).find("semaphore name")) << e.what();
    }
  }
  EXPECT_NO_THROW(FairSemaphore(redis_options(), std::string(200, 'n'), options(1)));
  EXPECT_EQ(keys_before + 1, integer({"DBSIZE"}));  // only the valid one stored its limit
}

TEST_F(SemaphoreTest, BadOptionsAreRefused) {
  const long long keys_before = integer({"DBSIZE"});
  auto expect_refused = [&](SemaphoreOptions o, const std::string& expected) {
    try {
      FairSemaphore sem(redis_options(), "bad-options", o);
      ADD_FAILURE() << "accepted; expected an error mentioning " << expected;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string::npos, std::string(e.what()).find(expected)) << e.what();
    }
  };
  SemaphoreOptions o = options(1);
  o.limit = 0;
  expect_refused(o, "limit must be at least 1 and at most 1000000000, got 0");
  o.limit = -4;
  expect_refused(o, "got -4");
  o.limit = 1'000'000'001;
  expect_refused(o, "at most 1000000000, got 1000000001");
  o = options(1);
  o.lease = 0ms;
  expect_refused(o, "lease must be positive, got 0 ms");
  o.lease = -5ms;
  expect_refused(o, "got -5 ms");
  o.lease = std::chrono::hours(24 * 31);
  expect_refused(o, "lease must be at most");
  o = options(1, 3000ms);
  o.renew_interval = 3000ms;
  expect_refused(o, "renew_interval (3000 ms) must be shorter than the lease (3000 ms)");
  o.renew_interval = 5000ms;
  expect_refused(o, "renew_interval (5000 ms)");
  o.renew_interval = -1ms;
  expect_refused(o, "must not be negative");
  o = options(1);
  o.key_prefix = "my app";
  expect_refused(o, "key_prefix");
  o = options(1);
  o.permit_id = "id{1}";
  expect_refused(o, "permit_id");
  o = options(1);
  o.min_replicas = -1;
  expect_refused(o, "min_replicas must not be negative, got -1");
  o.min_replicas = 1;
  o.replica_timeout = 0ms;
  expect_refused(o, "replica_timeout must be positive, got 0 ms");
  o = options(1, 1000ms);  // renew interval 333 ms: a WAIT may take (1000 - 333) / 2 ms
  o.min_replicas = 1;
  o.replica_timeout = 334ms;
  expect_refused(o,
                 "replica_timeout (334 ms) must be at most half of lease - renew_interval "
                 "(333 ms here)");
  EXPECT_EQ(keys_before, integer({"DBSIZE"}));
}

TEST_F(SemaphoreTest, ForeignKeyOfAnotherTypeIsLeftAlone) {
  for (const std::string suffix : {"owner", "time", "meta", "info", "counter"}) {
    const std::string name = "foreign-" + suffix;
    const std::string foreign = key(name, suffix);
    if (suffix == "counter") {
      admin_.command({"HSET", foreign, "field", "value"});
    } else {
      admin_.command({"SET", foreign, "not fairsem's"});
    }
    const auto before = snapshot();
    try {
      FairSemaphore sem(redis_options(), name, options(1));
      ADD_FAILURE() << "a foreign " << suffix << " key was accepted";
    } catch (const ReplyError& e) {
      EXPECT_NE(std::string::npos, std::string(e.what()).find("'" + foreign + "'")) << e.what();
      EXPECT_EQ(0u, e.server_message().find("WRONGTYPE")) << e.server_message();
    }
    EXPECT_EQ(before, snapshot()) << suffix;
  }
  // A counter that is a string but not a number is refused before anything is written: when
  // the semaphore is opened, and when it turns up later.
  const std::string counter = key("foreign-text", "counter");
  admin_.command({"SET", counter, "twelve"});
  auto before = snapshot();
  EXPECT_THROW(FairSemaphore(redis_options(), "foreign-text", options(1)), ReplyError);
  EXPECT_EQ(before, snapshot());
  admin_.command({"DEL", counter});
  FairSemaphore sem(redis_options(), "foreign-text", options(1));
  admin_.command({"SET", counter, "twelve"});
  before = snapshot();
  EXPECT_THROW((void)sem.try_acquire(), ReplyError);
  EXPECT_EQ(before, snapshot());
}

// Behaviour 11: a timed-out wait leaves nothing behind.
TEST_F(SemaphoreTest, TimedOutWaitLeavesNothingBehind) {
  FairSemaphore sem(redis_options(), "give-up", options(1, 60s));
  Permit holder = sem.acquire();
  const auto before = snapshot();
  const auto start = std::chrono::steady_clock::now();
  auto q = sem.try_acquire_for(300ms);
  EXPECT_FALSE(q);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
  auto after = snapshot();
  // Only the counter moved (the ticket the waiter was given); no queue entry, no wake list.
  after.erase(key("give-up", "counter"));
  auto expected = before;
  expected.erase(key("give-up", "counter"));
  EXPECT_EQ(expected, after);
  EXPECT_TRUE(admin_.command({"KEYS", prefix_ + "*wake*"}).elements.empty());
  EXPECT_EQ(1, integer({"ZCARD", key("give-up", "owner")}));
  EXPECT_EQ(1, integer({"HLEN", key("give-up", "info")}));
  // A deadline already passed behaves as try_acquire: no queueing at all.
  admin_.command({"CONFIG", "RESETSTAT"});
  EXPECT_FALSE(sem.try_acquire_until(std::chrono::system_clock::now() - 1s));
  EXPECT_EQ(1, calls("evalsha"));
}

// Behaviour 11: a waiter that gives up just after being promoted passes the permit on.
TEST_F(SemaphoreTest, GivingUpAfterPromotionPassesThePermitOn) {
  const std::string name = "promoted-give-up";
  FairSemaphore sem(redis_options(), name, options(1));
  Permit holder = sem.acquire();
  // A waiter "w" queued through the script itself, so the test controls when it gives up.
  Connection raw(redis_options());
  const std::vector<std::string> key_names = script_keys(name);
  const detail::Args keys(key_names.begin(), key_names.end());
  raw.eval(detail::scripts::semaphore_script("acquire"), keys,
           {"acquire", "1", "10000", "w", "queue", "test"});
  std::atomic<bool> granted{false};
  std::thread behind([&] {
    auto p = sem.try_acquire_for(20s);
    granted = p.has_value();
  });
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 2; }));
  holder.release();  // promotes w and pushes its wake list
  EXPECT_EQ(1, integer({"LLEN", key(name, "wake:w")}));
  ASSERT_EQ("w", sem.status().holders.at(0).id);
  // What a waiter runs when its time is up: the release passes the permit to the next one.
  const Reply r = raw.eval(detail::scripts::semaphore_script("release"), keys,
                           {"release", "1", "10000", "w", "0", "10000"});
  EXPECT_EQ(1, r.elements.at(0).integer);
  behind.join();
  EXPECT_TRUE(granted);
  EXPECT_EQ(0, integer({"EXISTS", key(name, "wake:w")}));
  EXPECT_EQ(0, integer({"HEXISTS", key(name, "info"), "w"}));
}

TEST_F(SemaphoreTest, CallerChosenIdIsIdempotent) {
  SemaphoreOptions o = options(2);
  o.permit_id = "machine-7";
  FairSemaphore one(redis_options(), "chosen", o);
  FairSemaphore two(redis_options(), "chosen", o);
  Permit a = one.acquire();
  auto b = two.try_acquire();
  ASSERT_TRUE(b);
  EXPECT_EQ("machine-7", a.id());
  EXPECT_EQ(a.fencing_token(), b->fencing_token());
  EXPECT_EQ(1, integer({"ZCARD", key("chosen", "owner")}));
  EXPECT_EQ("1", admin_.command({"GET", key("chosen", "counter")}).str);
}

// A permit is its id and its ticket: a holder whose lease ran out cannot release or renew a
// later permit that reuses its caller-chosen id.
TEST_F(SemaphoreTest, StaleHolderCannotTouchALaterPermitWithTheSameId) {
  SemaphoreOptions o = options(1, 500ms);
  o.permit_id = "job-9";
  o.auto_renew = false;
  FairSemaphore first(redis_options(), "reused-id", o);
  Permit stale = first.acquire();
  ASSERT_TRUE(wait_until([&] { return first.status().holders.empty(); }));  // expired, reaped
  EXPECT_TRUE(stale.lost());  // its deadline passed without a renewal
  FairSemaphore second(redis_options(), "reused-id", o);
  Permit current = second.acquire();
  EXPECT_GT(current.fencing_token(), stale.fencing_token());
  EXPECT_FALSE(stale.renew());
  EXPECT_EQ(ReleaseResult::expired, stale.release());
  const Status s = second.status();
  ASSERT_EQ(1u, s.holders.size());
  EXPECT_EQ(current.fencing_token(), s.holders[0].ticket);
  EXPECT_TRUE(current.renew());
}

// The client's deadline is never later than the moment Redis reaps the permit: Redis reads
// its clock in whole milliseconds, so it must only reap a lease strictly past its deadline.
// Polling status() back to back hits the first reaping call to within a round trip.
TEST_F(SemaphoreTest, RedisNeverReapsAPermitBeforeTheClientDeadline) {
  SemaphoreOptions o = options(1, 20ms);
  o.auto_renew = false;
  FairSemaphore sem(redis_options(), "reap-boundary", o);
  for (int round = 0; round < 25; ++round) {
    Permit p = sem.acquire();
    while (!sem.status().holders.empty()) {
    }
    ASSERT_TRUE(p.lost()) << "round " << round << ": reaped "
                          << std::chrono::duration_cast<std::chrono::microseconds>(
                                 p.deadline() - std::chrono::steady_clock::now())
                                 .count()
                          << " us before the client's deadline";
    EXPECT_EQ(ReleaseResult::expired, p.release());
  }
}

// Tickets only grow: if the counter key is lost, new tickets continue after the newest one
// still queued instead of sorting ahead of the holders.
TEST_F(SemaphoreTest, LostCounterNeverLetsANewcomerAheadOfHolders) {
  FairSemaphore sem(redis_options(), "lost-counter", options(2));
  for (int i = 0; i < 2; ++i) sem.acquire().release();
  Permit holder = sem.acquire();
  ASSERT_EQ(3, holder.fencing_token());
  admin_.command({"DEL", key("lost-counter", "counter")});
  Permit next = sem.acquire();
  EXPECT_EQ(4, next.fencing_token());
  EXPECT_EQ("4", admin_.command({"GET", key("lost-counter", "counter")}).str);
  EXPECT_FALSE(sem.try_acquire());
}

// Permit ids come from the kernel: a forked child never draws the id its parent draws next.
TEST_F(SemaphoreTest, ForkedProcessesNeverShareAPermitId) {
  SemaphoreOptions o = options(2);
  o.auto_renew = false;  // no watchdog thread: the fork happens in a single-threaded process
  FairSemaphore sem(redis_options(), "forked", o);
  auto first = sem.try_acquire();  // the parent has drawn an id before forking
  ASSERT_TRUE(first);
  first->release();
  int fds[2];
  ASSERT_EQ(0, ::pipe(fds));
  const pid_t child = ::fork();
  ASSERT_NE(-1, child);
  if (child == 0) {
    ::close(fds[0]);
    long long token = -1;
    try {
      FairSemaphore own(redis_options(), "forked", o);
      auto p = own.try_acquire();
      token = p ? p->fencing_token() : 0;
      if (p) p->release();
    } catch (...) {
    }
    const std::string line = std::to_string(token);
    if (::write(fds[1], line.data(), line.size()) < 0) ::_exit(2);
    ::_exit(0);
  }
  ::close(fds[1]);
  auto mine = sem.try_acquire();
  char buf[32] = {};
  const ssize_t n = ::read(fds[0], buf, sizeof(buf) - 1);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_GT(n, 0);
  const long long child_token = std::stoll(std::string(buf, static_cast<std::size_t>(n)));
  ASSERT_TRUE(mine);
  EXPECT_GT(child_token, 0);
  EXPECT_NE(mine->fencing_token(), child_token) << "parent and child were granted one permit";
}

// A Redis restart with AOF: the permit survives, its release works afterwards, and tickets
// keep growing.
TEST_F(SemaphoreTest, PermitsSurviveARedisRestartWithAof) {
  test::RedisServer server({"--appendonly", "yes", "--appendfsync", "always"});
  ConnectionOptions conn = redis_options();
  conn.port = server.port();
  SemaphoreOptions o = options(1, 60s);
  o.logger = [](LogLevel, std::string_view) {};  // reconnect warnings are expected here
  FairSemaphore sem(conn, "restart", o);
  FairSemaphore outsider(conn, "restart", o);
  Permit p = sem.acquire();
  server.restart();
  EXPECT_FALSE(outsider.try_acquire()) << "the permit did not survive the restart";
  EXPECT_EQ(ReleaseResult::released, p.release());
  auto next = outsider.try_acquire();
  ASSERT_TRUE(next);
  EXPECT_GT(next->fencing_token(), p.fencing_token());
}

TEST_F(SemaphoreTest, WorksAsATimedLockable) {
  FairSemaphore sem(redis_options(), "lockable", options(1));
  SemaphoreLock mine(sem);
  SemaphoreLock theirs(sem);
  {
    std::unique_lock<SemaphoreLock> guard(mine);
    EXPECT_TRUE(mine.permit().held());
    EXPECT_GT(mine.permit().fencing_token(), 0);
    EXPECT_FALSE(theirs.try_lock());
    EXPECT_FALSE(theirs.try_lock_for(50ms));
    EXPECT_FALSE(theirs.try_lock_until(std::chrono::steady_clock::now() + 50ms));
    EXPECT_THROW(mine.lock(), std::system_error);
  }
  EXPECT_FALSE(mine.permit().held());
  {
    std::scoped_lock guard(theirs);
    EXPECT_TRUE(theirs.permit().held());
  }
  EXPECT_THROW(theirs.unlock(), std::system_error);
  std::unique_lock<SemaphoreLock> timed(mine, 1s);
  EXPECT_TRUE(timed.owns_lock());
}

TEST_F(SemaphoreTest, ManyThreadsShareOneSemaphore) {
  FairSemaphore sem(redis_options(), "threads", options(2));
  std::atomic<int> inside{0};
  std::atomic<int> most{0};
  std::atomic<int> grants{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        Permit p = sem.acquire();
        const int now = ++inside;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        --inside;
        ++grants;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(150, grants.load());
  EXPECT_LE(most.load(), 2);
  EXPECT_TRUE(sem.status().holders.empty());
}

// --- Eviction and SemaphoreAdmin ------------------------------------------------------------

// An evicted holder's permit passes on at once; the holder learns it from its next renewal.
TEST_F(SemaphoreTest, EvictingAHolderPassesItOnAndTellsTheHolder) {
  std::mutex mu;
  std::vector<std::string> reasons;
  // Long leases: the waiter polls only every 30 s and the holder's lease lasts 90 s, so a grant
  // within 20 s can only come from the eviction's wake-up. The holder renews every 200 ms.
  SemaphoreOptions o = options(1, 90s);
  o.renew_interval = 200ms;
  o.on_lost = [&](const std::string&, const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu);
    reasons.push_back(reason);
  };
  FairSemaphore sem(redis_options(), "evict-holder", o);
  FairSemaphore other(redis_options(), "evict-holder", options(1, 90s));
  Permit holder = sem.acquire();
  std::promise<long long> next_token;
  std::thread waiter([&] { next_token.set_value(other.acquire().fencing_token()); });
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  EXPECT_EQ(EvictResult::holder, sem.evict(holder.id()));
  auto granted = next_token.get_future();
  ASSERT_EQ(std::future_status::ready, granted.wait_for(20s));
  EXPECT_EQ(holder.fencing_token() + 1, granted.get());
  waiter.join();
  ASSERT_TRUE(wait_until([&] {
    std::lock_guard<std::mutex> lock(mu);
    return !reasons.empty();
  }));
  EXPECT_TRUE(holder.lost());
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(1u, reasons.size());
    EXPECT_NE(std::string::npos, reasons[0].find("evicted")) << reasons[0];
  }
  // Evicting again (as a retry after a lost reply would) is harmless and says so.
  EXPECT_EQ(EvictResult::already_evicted, sem.evict(holder.id()));
  EXPECT_EQ(ReleaseResult::expired, holder.release());
}

// A waiter blocked in acquire() is told at once, with the id it was queued under.
TEST_F(SemaphoreTest, EvictingABlockedWaiterEndsItsAcquireWithEvictedError) {
  // A 90 s lease: the waiter polls every 30 s, so only the eviction's wake-up ends it sooner.
  FairSemaphore sem(redis_options(), "evict-waiter", options(1, 90s));
  Permit holder = sem.acquire();
  std::promise<std::string> outcome;
  std::thread waiter([&] {
    try {
      Permit p = sem.acquire();
      outcome.set_value("granted " + p.id());
    } catch (const EvictedError& e) {
      outcome.set_value("evicted " + e.permit_id() + ": " + e.what());
    }
  });
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  const std::string id = sem.status().waiters.at(0).id;
  EXPECT_EQ(EvictResult::waiter, sem.evict(id));
  auto result = outcome.get_future();
  ASSERT_EQ(std::future_status::ready, result.wait_for(20s));
  const std::string text = result.get();
  EXPECT_EQ(0u, text.rfind("evicted " + id + ": ", 0)) << text;
  EXPECT_NE(std::string::npos, text.find("evict-waiter")) << text;
  waiter.join();
  const Status s = sem.status();
  EXPECT_EQ(1u, s.holders.size());
  EXPECT_TRUE(s.waiters.empty());
  EXPECT_EQ(0, integer({"EXISTS", key("evict-waiter", "wake:" + id)}));  // marker consumed
  EXPECT_TRUE(holder.renew());                                           // the holder is untouched
}

// A waiter evicted between two polls (not blocked on its wake list at that moment) finds the
// marker when it polls with its ticket, instead of queueing again at the back.
TEST_F(SemaphoreTest, WaiterEvictedBetweenPollsIsNotQueuedAgain) {
  const std::string name = "evict-between-polls";
  FairSemaphore sem(redis_options(), name, options(1));
  Permit holder = sem.acquire();
  Connection raw(redis_options());
  const std::vector<std::string> key_names = script_keys(name);
  const detail::Args keys(key_names.begin(), key_names.end());
  const Reply queued = raw.eval(detail::scripts::semaphore_script("acquire"), keys,
                                {"acquire", "1", "10000", "w", "queue", "t"});
  ASSERT_EQ(2, queued.elements.at(0).integer);
  const std::string ticket = std::to_string(queued.elements.at(1).integer);
  EXPECT_EQ(EvictResult::waiter, sem.evict("w"));
  const Reply polled = raw.eval(detail::scripts::semaphore_script("acquire"), keys,
                                {"acquire", "1", "10000", "w", "queue", "t", ticket});
  EXPECT_EQ(3, polled.elements.at(0).integer);
  EXPECT_TRUE(sem.status().waiters.empty());
  EXPECT_EQ(0, integer({"EXISTS", key(name, "wake:w")}));  // the marker was consumed
  EXPECT_EQ(EvictResult::not_found, sem.evict("w"));
}

TEST_F(SemaphoreTest, ANewRequestUnderAnEvictedIdStartsClean) {
  const std::string name = "evict-reuse";
  SemaphoreOptions o = options(1);
  o.permit_id = "job-1";
  FairSemaphore sem(redis_options(), name, o);
  Permit first = sem.acquire();
  ASSERT_EQ(EvictResult::holder, sem.evict("job-1"));
  ASSERT_EQ(1, integer({"EXISTS", key(name, "wake:job-1")}));  // the marker, for the holder
  Permit second = sem.acquire();
  EXPECT_GT(second.fencing_token(), first.fencing_token());
  EXPECT_EQ(0, integer({"EXISTS", key(name, "wake:job-1")}));
  EXPECT_TRUE(second.renew());
  EXPECT_FALSE(first.renew());  // the old ticket stays gone
}

TEST_F(SemaphoreTest, EvictRejectsABadIdAndChangesNothing) {
  FairSemaphore sem(redis_options(), "evict-bad-id", options(1));
  Permit p = sem.acquire();
  const long long keys_before = integer({"DBSIZE"});
  for (const std::string& bad :
       std::vector<std::string>{"", "a b", "x{y}", std::string(201, 'x')}) {
    EXPECT_THROW((void)sem.evict(bad), InvalidArgument) << bad;
  }
  EXPECT_EQ(keys_before, integer({"DBSIZE"}));
  EXPECT_TRUE(p.renew());
}

// SemaphoreAdmin reads the limit Redis stores, and opening one writes nothing.
TEST_F(SemaphoreTest, AdminReadsAndEvictsWithoutKnowingTheLimit) {
  FairSemaphore sem(redis_options(), "admin-view", options(2));
  Permit a = sem.acquire();
  Permit b = sem.acquire();
  std::thread waiter([&] { EXPECT_THROW((void)sem.acquire(), EvictedError); });
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  SemaphoreOptions o;
  o.key_prefix = options(1).key_prefix;
  SemaphoreAdmin admin(redis_options(), "admin-view", o.key_prefix);
  Status s = admin.status();
  EXPECT_EQ(2, s.limit);
  ASSERT_EQ(2u, s.holders.size());
  EXPECT_EQ(a.id(), s.holders[0].id);
  ASSERT_EQ(1u, s.waiters.size());
  EXPECT_EQ(EvictResult::waiter, admin.evict(s.waiters[0].id));
  waiter.join();
  EXPECT_EQ(EvictResult::holder, admin.evict(b.id()));
  s = admin.status();
  EXPECT_EQ(1u, s.holders.size());
  EXPECT_TRUE(s.waiters.empty());

  const long long keys_before = integer({"DBSIZE"});
  SemaphoreAdmin nobody(redis_options(), "never-used", o.key_prefix);
  const Status empty = nobody.status();
  EXPECT_EQ(0, empty.limit);
  EXPECT_TRUE(empty.holders.empty());
  EXPECT_TRUE(empty.waiters.empty());
  EXPECT_EQ(EvictResult::not_found, nobody.evict("x"));
  EXPECT_EQ(keys_before, integer({"DBSIZE"}));
  EXPECT_THROW(SemaphoreAdmin(redis_options(), "bad name", o.key_prefix), InvalidArgument);
}

TEST_F(SemaphoreTest, AdminRefusesAStoredLimitThatIsNotANumber) {
  const std::string prefix = options(1).key_prefix;
  admin_.command({"HSET", key("garbled", "meta"), "limit", "lots"});
  SemaphoreAdmin admin(redis_options(), "garbled", prefix);
  try {
    (void)admin.status();
    FAIL() << "status() accepted a non-numeric stored limit";
  } catch (const ReplyError& e) {
    EXPECT_NE(std::string::npos, std::string(e.what()).find("not a number")) << e.what();
  }
}

// --- Slots -------------------------------------------------------------------------------------

TEST_F(SemaphoreTest, EachGrantTakesTheLowestFreeSlot) {
  FairSemaphore sem(redis_options(), "slots", options(3));
  Permit a = sem.acquire();
  Permit b = sem.acquire();
  Permit c = sem.acquire();
  EXPECT_EQ(0, a.slot());
  EXPECT_EQ(1, b.slot());
  EXPECT_EQ(2, c.slot());
  const long long b_token = b.fencing_token();
  b.release();
  auto d = sem.try_acquire();
  ASSERT_TRUE(d);
  EXPECT_EQ(1, d->slot());
  EXPECT_GT(d->fencing_token(), b_token);
  const Status s = sem.status();
  ASSERT_EQ(3u, s.holders.size());
  EXPECT_EQ(0, s.holders[0].slot);
  EXPECT_EQ(2, s.holders[1].slot);
  EXPECT_EQ(1, s.holders[2].slot);
  EXPECT_EQ(-1, Permit().slot());
}

/// A waiter on its own thread: try_acquire_for(20 s), its permit kept until the test ends.
// Released, reaped or evicted, a holder's slot goes to the next holder, whose token is higher.
TEST_F(SemaphoreTest, ASlotPassesOnWithItsPermit) {
  const std::string name = "slot-handover";
  FairSemaphore sem(redis_options(), name, options(2));
  Permit keep = sem.acquire();   // slot 0 throughout
  Permit first = sem.acquire();  // slot 1
  ASSERT_EQ(1, first.slot());
  {
    // Released: the promoted waiter learns its slot from its wake-up.
    BackgroundWaiter waiter(sem);
    ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
    first.release();
    Permit* next = waiter.result();
    ASSERT_NE(nullptr, next);
    EXPECT_EQ(1, next->slot());
    EXPECT_GT(next->fencing_token(), first.fencing_token());
    // Evicted: the slot goes to the waiter the eviction promotes.
    BackgroundWaiter after_eviction(sem);
    ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
    ASSERT_EQ(EvictResult::holder, sem.evict(next->id()));
    Permit* evicted_into = after_eviction.result();
    ASSERT_NE(nullptr, evicted_into);
    EXPECT_EQ(1, evicted_into->slot());
    EXPECT_GT(evicted_into->fencing_token(), next->fencing_token());
  }
  // Reaped: a holder that stops renewing leaves its slot to whoever acquires after its lease.
  SemaphoreOptions brief = options(2, 300ms);
  brief.auto_renew = false;
  FairSemaphore forgetful(redis_options(), name, brief);
  Permit expiring = forgetful.acquire();
  ASSERT_EQ(1, expiring.slot());
  std::optional<Permit> successor;
  ASSERT_TRUE(wait_until([&] { return (successor = sem.try_acquire()).has_value(); }));
  EXPECT_EQ(1, successor->slot());
  EXPECT_GT(successor->fencing_token(), expiring.fencing_token());
  EXPECT_EQ(0, keep.slot());
  EXPECT_TRUE(keep.renew());
}

// --- Resize ------------------------------------------------------------------------------------

TEST_F(SemaphoreTest, GrowingGrantsTheWaitersItLetsIn) {
  const std::string name = "grow";
  FairSemaphore sem(redis_options(), name, options(1));
  Permit holder = sem.acquire();
  BackgroundWaiter w1(sem);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  BackgroundWaiter w2(sem);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 2; }));
  const ResizeResult r = sem.resize(3);
  EXPECT_EQ(1, r.old_limit);
  EXPECT_EQ(3, r.new_limit);
  EXPECT_EQ(2, r.promoted);
  Permit* p1 = w1.result();
  Permit* p2 = w2.result();
  ASSERT_TRUE(p1 && p2);
  EXPECT_EQ(1, p1->slot());
  EXPECT_EQ(2, p2->slot());
  const Status s = sem.status();
  EXPECT_EQ(3, s.limit);
  EXPECT_EQ(3u, s.holders.size());
  EXPECT_EQ(1, sem.options().limit);  // the handle keeps its options
  // The open client follows the new limit; a new one must be opened with it.
  EXPECT_FALSE(sem.try_acquire());
  EXPECT_THROW(FairSemaphore(redis_options(), name, options(1)), LimitMismatchError);
  FairSemaphore fresh(redis_options(), name, options(3));
  holder.release();
  auto again = fresh.try_acquire();
  ASSERT_TRUE(again);
  EXPECT_EQ(0, again->slot());
}

TEST_F(SemaphoreTest, ShrinkingLetsHoldersFinishAndGrantsNothingUntilFewerHold) {
  const std::string name = "shrink";
  FairSemaphore sem(redis_options(), name, options(3));
  Permit a = sem.acquire();
  Permit b = sem.acquire();
  Permit c = sem.acquire();
  const ResizeResult r = sem.resize(1);
  EXPECT_EQ(3, r.old_limit);
  EXPECT_EQ(1, r.new_limit);
  EXPECT_EQ(0, r.promoted);
  EXPECT_EQ(3u, sem.renew_all());  // nobody lost a permit
  BackgroundWaiter waiter(sem);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  EXPECT_FALSE(sem.try_acquire());
  // Each release promotes only once fewer than the new limit hold.
  a.release();
  Status s = sem.status();
  EXPECT_EQ(2u, s.holders.size());
  EXPECT_EQ(1u, s.waiters.size());
  b.release();
  s = sem.status();
  EXPECT_EQ(1u, s.holders.size());
  EXPECT_EQ(1u, s.waiters.size());
  EXPECT_FALSE(waiter.done);
  EXPECT_EQ(2, c.slot());  // its slot is beyond the new limit; it retires with the permit
  c.release();
  Permit* granted = waiter.result();
  ASSERT_NE(nullptr, granted);
  EXPECT_EQ(0, granted->slot());
  EXPECT_FALSE(sem.try_acquire());
  // The slots beyond the limit are gone: growing again hands them out afresh.
  sem.resize(2);
  auto second = sem.try_acquire();
  ASSERT_TRUE(second);
  EXPECT_EQ(1, second->slot());
}

// A holder whose lease ran out but was not reaped yet: a shrink reaps it under the new limit,
// so its slot does not pass to a waiter the new limit keeps out.
TEST_F(SemaphoreTest, ShrinkingDoesNotGrantTheSlotOfAnExpiredHolder) {
  const std::string name = "shrink-expired";
  FairSemaphore sem(redis_options(), name, options(3));
  Permit a = sem.acquire();
  Permit b = sem.acquire();
  Permit c = sem.acquire();
  BackgroundWaiter waiter(sem);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  admin_.command({"ZADD", key(name, "time"), "XX", "1", c.id()});  // c's lease ran out
  const ResizeResult r = sem.resize(1);
  EXPECT_EQ(0, r.promoted);
  const Status s = sem.status();
  ASSERT_EQ(2u, s.holders.size());
  EXPECT_EQ(1u, s.waiters.size());
  EXPECT_FALSE(waiter.done);
  a.release();
  b.release();
  Permit* granted = waiter.result();
  ASSERT_NE(nullptr, granted);
  EXPECT_EQ(0, granted->slot());
}

// Without the slots hash nobody can tell which permit has which slot: every entry is dropped
// (the holders are told at their next renewal), rather than a slot handed out twice.
TEST_F(SemaphoreTest, DeletingTheSlotsHashRevokesEveryPermit) {
  const std::string name = "slots-deleted";
  FairSemaphore sem(redis_options(), name, options(3));
  Permit a = sem.acquire();
  Permit b = sem.acquire();
  admin_.command({"DEL", key(name, "slots")});
  auto c = sem.try_acquire();
  ASSERT_TRUE(c);
  EXPECT_EQ(0, c->slot());
  EXPECT_FALSE(a.renew());
  EXPECT_FALSE(b.renew());
  const Status s = sem.status();
  ASSERT_EQ(1u, s.holders.size());
  EXPECT_EQ(c->id(), s.holders[0].id);
}

// A semaphore written by 0.1 (no slots, no free, meta without `slots`): on first use its
// first `limit` members become the holders, in ticket order, and the rest keep waiting.
TEST_F(SemaphoreTest, ASemaphoreOfTheEarlierFormatGetsSlotsOnFirstUse) {
  const std::string name = "upgrade";
  const std::string far = "9999999999999";  // deadlines far ahead
  admin_.command({"ZADD", key(name, "owner"), "1", "a", "2", "b", "3", "c"});
  admin_.command({"ZADD", key(name, "time"), far, "a", far, "b", far, "c"});
  admin_.command({"SET", key(name, "counter"), "3"});
  admin_.command({"HSET", key(name, "meta"), "limit", "2"});
  // The first operation is the release of a holder (a 0.1 client's, say): it must find a
  // holder, and pass its slot to the first waiter.
  Connection raw(redis_options());
  const std::vector<std::string> key_names = script_keys(name);
  const detail::Args keys(key_names.begin(), key_names.end());
  const Reply released = raw.eval(detail::scripts::semaphore_script("release"), keys,
                                  {"release", "2", "10000", "a", "1", "60000"});
  EXPECT_EQ(1, released.elements.at(0).integer);  // a holder released, not a waiter leaving
  FairSemaphore sem(redis_options(), name, options(2));
  const Status s = sem.status();
  ASSERT_EQ(2u, s.holders.size());
  EXPECT_EQ("b", s.holders[0].id);
  EXPECT_EQ(1, s.holders[0].slot);
  EXPECT_EQ("c", s.holders[1].id);
  EXPECT_EQ(0, s.holders[1].slot);  // a's
  EXPECT_TRUE(s.waiters.empty());
  EXPECT_FALSE(sem.try_acquire());
}

TEST_F(SemaphoreTest, ResizeRefusesABadLimitAndChangesNothing) {
  FairSemaphore sem(redis_options(), "resize-bad", options(2));
  Permit p = sem.acquire();
  const auto before = snapshot();
  for (const long long bad : {0LL, -1LL, 1'000'000'001LL}) {
    try {
      (void)sem.resize(bad);
      ADD_FAILURE() << "resize(" << bad << ") was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string::npos, std::string(e.what()).find(std::to_string(bad))) << e.what();
    }
  }
  EXPECT_EQ(before, snapshot());
  // SemaphoreAdmin resizes without knowing the limit.
  SemaphoreAdmin admin(redis_options(), "resize-bad", prefix_);
  EXPECT_EQ(2, admin.resize(4).old_limit);
  EXPECT_EQ(4, admin.status().limit);
}

// Under load, while the limit moves 3 -> 1 -> 4 -> 2: no two permits share a slot, and every
// grant asked for after a resize returned (and before the next began) keeps to its limit.
TEST_F(SemaphoreTest, ResizeUnderLoadKeepsSlotsUniqueAndTheNewLimit) {
  const std::string name = "resize-load";
  FairSemaphore sem(redis_options(), name, options(3));
  std::mutex mu;
  std::set<long long> slots_in_use;
  long long holding = 0;
  std::atomic<long long> grants{0};
  std::atomic<int> phase{0};  // odd while a resize runs
  std::atomic<long long> limit_in_force{3};
  std::atomic<long long> shared_slots{0};
  std::atomic<long long> over_limit{0};
  std::atomic<bool> stop{false};
  std::string first_error;  // guarded by mu
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      while (!stop) {
        const int asked_in = phase.load();
        std::optional<Permit> p;
        try {
          p = sem.try_acquire_for(2s);
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> lock(mu);
          if (first_error.empty()) first_error = e.what();
          stop = true;
        }
        if (!p) continue;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (!slots_in_use.insert(p->slot()).second) ++shared_slots;
          ++holding;
          // Counted after the grant and uncounted before the release: never above the truth.
          if (asked_in % 2 == 0 && phase.load() == asked_in && holding > limit_in_force) {
            ++over_limit;
          }
        }
        ++grants;
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
        {
          std::lock_guard<std::mutex> lock(mu);
          slots_in_use.erase(p->slot());
          --holding;
        }
        p->release();
      }
    });
  }
  const auto progress = [&] {
    const long long before = grants.load();
    EXPECT_TRUE(wait_until([&] { return stop || grants.load() >= before + 50; }));
  };
  for (const long long limit : {1LL, 4LL, 2LL}) {
    progress();
    ++phase;
    sem.resize(limit);
    limit_in_force = limit;
    ++phase;
  }
  progress();
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ("", first_error);
  EXPECT_EQ(0, shared_slots.load());
  EXPECT_EQ(0, over_limit.load());
  const Status s = sem.status();
  EXPECT_EQ(2, s.limit);
  EXPECT_TRUE(s.holders.empty());
}

}  // namespace
}  // namespace fairsem
