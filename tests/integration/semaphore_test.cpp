// SemaphoreTest, the basics, against a real redis-server: grants up to the limit, permits as
// values, status, FIFO order and no overtaking, one script call per operation, a release waking
// exactly the promoted waiter, clean give-up, caller-chosen ids, SemaphoreLock, many threads.
// The suite goes on in semaphore_{lease,refusal,eviction,slot}_test.cpp; multi-process
// guarantees live in process_test.cpp, lost replies in lost_reply_test.cpp.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>

#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/protocol/scripts.hpp"
#include "semaphore_fixture.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using detail::Connection;
using detail::Reply;
using test::redis_options;
using test::SemaphoreTest;
using test::wait_until;

/// True for the handle of one of the semaphore's scripts (one per operation): its SHA1
/// (EVALSHA) or its function's name (FCALL).
bool is_semaphore_script(const std::string& handle) {
  return std::any_of(detail::scripts::semaphore_scripts.begin(),
                     detail::scripts::semaphore_scripts.end(), [&](const detail::Script* script) {
                       return script->sha1 == handle || script->function == handle;
                     });
}

/// True for a command name that runs a script: EVALSHA or FCALL, as SLOWLOG records it.
bool is_script_call(const std::string& command) {
  for (const char* name : {"EVALSHA", "evalsha", "FCALL", "fcall"}) {
    if (command == name) return true;
  }
  return false;
}

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
  EXPECT_EQ(p.fencing_token() + 1, s.last_ticket);
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
  EXPECT_EQ(1, script_calls());
  p->release();
  EXPECT_EQ(2, script_calls());
  Permit q = sem.acquire();
  EXPECT_EQ(3, script_calls());
  q.release();
  EXPECT_EQ(4, script_calls());
  // All of them functions where the server has them, all scripts where it has not.
  EXPECT_EQ(0, calls(has_functions() ? "evalsha" : "fcall"));
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
    if (argv.size() > 4 && is_script_call(argv[0].str) && is_semaphore_script(argv[1].str)) {
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
  EXPECT_EQ(1, script_calls());
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
  EXPECT_EQ(std::to_string(a.fencing_token()),
            admin_.command({"GET", key("chosen", "counter")}).str);
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

// A SemaphoreLock of N units takes N units with every kind of lock, and refuses a unit count
// no lock could ever take.
TEST_F(SemaphoreTest, ASemaphoreLockTakesItsUnits) {
  FairSemaphore sem(redis_options(), "lock-units", options(4));
  SemaphoreLock three(sem, 3);
  SemaphoreLock two(sem, 2);
  EXPECT_EQ(3, three.units());
  {
    std::unique_lock<SemaphoreLock> guard(three);
    EXPECT_EQ(3, three.permit().count());
    const Status status = sem.status();
    ASSERT_EQ(1u, status.holders.size());
    EXPECT_EQ(3, status.holders.at(0).count);
    EXPECT_FALSE(two.try_lock()) << "2 units taken while only 1 was free";
    EXPECT_FALSE(two.try_lock_for(50ms));
    EXPECT_FALSE(two.try_lock_until(std::chrono::steady_clock::now() + 50ms));
  }
  ASSERT_TRUE(two.try_lock());
  EXPECT_EQ(2, two.permit().count());
  EXPECT_EQ(2, sem.status().holders.at(0).count);
  two.unlock();
  SemaphoreLock all(sem, 4);
  all.lock();
  EXPECT_EQ(4, all.permit().count());
  all.unlock();
  try {
    SemaphoreLock none(sem, 0);
    ADD_FAILURE() << "a lock of 0 units was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("of 0 units"));
  }
  try {
    SemaphoreLock too_many(sem, 5);
    ADD_FAILURE() << "a lock of more units than the limit was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("of 5 units"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("1 to 4"));
  }
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

}  // namespace
}  // namespace fairsem
