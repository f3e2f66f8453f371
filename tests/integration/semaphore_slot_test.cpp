// SemaphoreTest, slots and resize: each grant takes the lowest free slot and a slot passes on
// with its permit; growing and shrinking the limit, a lost slots hash, the 0.1 format upgraded.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

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
using test::BackgroundWaiter;
using test::redis_options;
using test::SemaphoreTest;
using test::wait_until;

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
