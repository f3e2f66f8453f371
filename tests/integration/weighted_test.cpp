// Weighted permits against a real redis-server: a request of n units is granted n distinct
// slots at once, in strict FIFO order for every size (a small request never overtakes a large
// one queued before it), gives units back in part, is refused with nothing written when it can
// never fit, and is ended with RequestTooLargeError when a resize leaves it too large.

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "fairsem/impl/protocol/scripts.hpp"
#include "semaphore_fixture.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using test::BackgroundWaiter;
using test::redis_options;
using test::wait_until;
using Slots = std::vector<long long>;

class WeightedTest : public test::SemaphoreFixture {
 protected:
  /// The units each entry of status() holds or asks for, holders first.
  static std::vector<long long> counts(const Status& s) {
    std::vector<long long> out;
    for (const auto& h : s.holders) out.push_back(h.count);
    out.push_back(0);  // between the holders and the waiters
    for (const auto& w : s.waiters) out.push_back(w.count);
    return out;
  }
};

TEST_F(WeightedTest, APermitOfNUnitsHoldsNDistinctSlots) {
  FairSemaphore sem(redis_options(), "units", options(8));
  Permit three = sem.acquire(3);
  EXPECT_EQ(3, three.count());
  EXPECT_EQ((Slots{0, 1, 2}), three.slots());
  EXPECT_EQ(0, three.slot());
  std::optional<Permit> five = sem.try_acquire(5);
  ASSERT_TRUE(five);
  EXPECT_EQ((Slots{3, 4, 5, 6, 7}), five->slots());
  EXPECT_GT(five->fencing_token(), three.fencing_token());
  EXPECT_FALSE(sem.try_acquire(1));  // all 8 units are held
  const Status s = sem.status();
  EXPECT_EQ((std::vector<long long>{3, 5, 0}), counts(s));
  EXPECT_EQ((Slots{3, 4, 5, 6, 7}), s.holders[1].slots);
  // The default is one unit, as before.
  three.release();
  Permit one = sem.acquire();
  EXPECT_EQ(1, one.count());
  EXPECT_EQ((Slots{0}), one.slots());
  // An empty permit holds nothing.
  one.release();
  EXPECT_EQ(0, one.count());
  EXPECT_TRUE(one.slots().empty());
}

// Strict FIFO: with 2 of 4 units free, a request for 1 unit queued behind one for 3 is not
// granted, and try_acquire(1) fails, until the 3 units are free; then both are granted, the
// large one first.
TEST_F(WeightedTest, ASmallRequestNeverOvertakesAnEarlierLargeOne) {
  FairSemaphore sem(redis_options(), "no-overtaking", options(4));
  Permit two = sem.acquire(2);
  BackgroundWaiter large(sem, 3);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  BackgroundWaiter small(sem, 1);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 2; }));
  EXPECT_FALSE(sem.try_acquire(1));
  const Status s = sem.status();
  EXPECT_EQ((std::vector<long long>{2, 0, 3, 1}), counts(s));
  EXPECT_FALSE(large.done);
  EXPECT_FALSE(small.done);
  two.release();
  Permit* l = large.result();
  Permit* m = small.result();
  ASSERT_NE(nullptr, l);
  ASSERT_NE(nullptr, m);
  EXPECT_EQ(3, l->count());
  EXPECT_EQ(1, m->count());
  EXPECT_LT(l->fencing_token(), m->fencing_token());
  // Four distinct slots between them.
  Slots all = l->slots();
  all.push_back(m->slot());
  std::sort(all.begin(), all.end());
  EXPECT_EQ((Slots{0, 1, 2, 3}), all);
}

// A holder's slots pass to the waiter its leaving promotes, whose fencing token is higher.
TEST_F(WeightedTest, TheSlotsOfAWeightedPermitPassOnWithAHigherToken) {
  FairSemaphore sem(redis_options(), "weighted-handover", options(3));
  Permit pair = sem.acquire(2);
  Permit single = sem.acquire(1);
  ASSERT_EQ((Slots{0, 1}), pair.slots());
  BackgroundWaiter waiter(sem, 2);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  const long long before = pair.fencing_token();
  pair.release();
  Permit* next = waiter.result();
  ASSERT_NE(nullptr, next);
  EXPECT_EQ((Slots{0, 1}), next->slots());
  EXPECT_GT(next->fencing_token(), before);
  EXPECT_EQ((Slots{2}), single.slots());
}

TEST_F(WeightedTest, BadUnitsAreRefusedAndWriteNothing) {
  const std::string name = "bad-units";
  FairSemaphore sem(redis_options(), name, options(4));
  Permit held = sem.acquire(2);
  const auto before = snapshot();
  for (const long long units : {0LL, -1LL, 5LL}) {
    EXPECT_THROW((void)sem.try_acquire(units), InvalidArgument) << units;
    EXPECT_THROW((void)sem.acquire(units), InvalidArgument) << units;
    EXPECT_THROW((void)sem.try_acquire_for(units, 10ms), InvalidArgument) << units;
    EXPECT_THROW((void)sem.acquire_async(units), InvalidArgument) << units;
    EXPECT_THROW((void)sem.acquire_async(units, [](auto, auto) {}), InvalidArgument) << units;
  }
  EXPECT_EQ(before, snapshot());
  // The limit stored in Redis counts, not the one this handle opened with: after a shrink to
  // 2, a request for 3 is refused by the script, again with nothing written.
  SemaphoreAdmin(redis_options(), name, prefix_).resize(2);
  const auto shrunk = snapshot();
  try {
    (void)sem.try_acquire(3);
    ADD_FAILURE() << "a request above the stored limit was not refused";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string::npos, std::string(e.what()).find("3 units")) << e.what();
    EXPECT_NE(std::string::npos, std::string(e.what()).find("limit 2")) << e.what();
  }
  EXPECT_THROW((void)sem.acquire(3), InvalidArgument);
  EXPECT_EQ(shrunk, snapshot());
  // A partial release of more units than held, or of none, is refused too.
  EXPECT_THROW(held.release(3), InvalidArgument);
  EXPECT_THROW(held.release(0), InvalidArgument);
  EXPECT_EQ(shrunk, snapshot());
  EXPECT_EQ(2, held.count());
}

// A shrink below a queued request's units ends it with RequestTooLargeError at once; the
// request behind it moves up and is granted when units are free; the holder keeps its units.
TEST_F(WeightedTest, AResizeBelowAQueuedRequestEndsItAndTheNextMovesUp) {
  // A lease so long that the waiters' own polls (every lease / 3) come after wait_until's
  // bound: the resize itself must end the request.
  FairSemaphore sem(redis_options(), "resize-below", options(4, 120s));
  Permit all = sem.acquire(4);
  BackgroundWaiter large(sem, 3);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  BackgroundWaiter small(sem, 1);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 2; }));
  sem.resize(2);
  ASSERT_TRUE(wait_until([&] { return large.done.load(); }));
  ASSERT_TRUE(large.thrown);
  try {
    std::rethrow_exception(large.thrown);
  } catch (const RequestTooLargeError& e) {
    EXPECT_EQ(3, e.units());
    EXPECT_FALSE(e.permit_id().empty());
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected RequestTooLargeError, got: " << e.what();
  }
  EXPECT_EQ((std::vector<long long>{4, 0, 1}), counts(sem.status()));
  EXPECT_FALSE(small.done);
  EXPECT_EQ(4, all.count());
  all.release();
  Permit* granted = small.result();
  ASSERT_NE(nullptr, granted);
  EXPECT_EQ(1, granted->count());
  EXPECT_LT(granted->slot(), 2);
}

// The asynchronous forms take units too; a request too large for the new limit completes with
// RequestTooLargeError.
TEST_F(WeightedTest, AsynchronousRequestsTakeUnits) {
  FairSemaphore sem(redis_options(), "async-units", options(4, 120s));
  Permit p = sem.acquire_async(3).get();
  EXPECT_EQ(3, p.count());
  auto waiting = sem.acquire_async(4);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  sem.resize(3);
  EXPECT_THROW(waiting.get(), RequestTooLargeError);
  auto later = sem.try_acquire_for_async(1, 5s);
  p.release(2);
  std::optional<Permit> q = later.get();
  ASSERT_TRUE(q);
  EXPECT_EQ(1, q->count());
}

// release(k) gives back the k highest slots, which go to the waiter they let in; the permit
// keeps its ticket and its lowest slots.
TEST_F(WeightedTest, APartialReleaseGivesBackTheHighestSlots) {
  FairSemaphore sem(redis_options(), "partial", options(4));
  Permit p = sem.acquire(4);
  const long long token = p.fencing_token();
  BackgroundWaiter waiter(sem, 1);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  EXPECT_EQ(ReleaseResult::released, p.release(1));
  EXPECT_TRUE(p.held());
  EXPECT_EQ(3, p.count());
  EXPECT_EQ((Slots{0, 1, 2}), p.slots());
  EXPECT_EQ(token, p.fencing_token());
  Permit* next = waiter.result();
  ASSERT_NE(nullptr, next);
  EXPECT_EQ((Slots{3}), next->slots());
  EXPECT_GT(next->fencing_token(), token);
  EXPECT_EQ((std::vector<long long>{3, 1, 0}), counts(sem.status()));
  EXPECT_TRUE(p.renew());  // the lease goes on
  // Giving back all that is left is a release.
  EXPECT_EQ(ReleaseResult::released, p.release(3));
  EXPECT_FALSE(p.held());
  EXPECT_EQ(ReleaseResult::already_released, p.release(1));
  EXPECT_EQ((std::vector<long long>{1, 0}), counts(sem.status()));
  // The metrics count units as well as permits: 4 + 1 granted, 1 + 3 given back in two
  // releases.
  const Metrics m = sem.metrics();
  EXPECT_EQ(2u, m.grants);
  EXPECT_EQ(5u, m.units_granted);
  EXPECT_EQ(2u, m.releases);
  EXPECT_EQ(4u, m.units_released);
}

// A partial release whose reply was lost is run again: keeping K units is idempotent, so the
// second run gives back nothing more.
TEST_F(WeightedTest, APartialReleaseRunTwiceGivesBackOnce) {
  const std::string name = "partial-twice";
  FairSemaphore sem(redis_options(), name, options(4));
  Permit p = sem.acquire(4);
  const auto keys = script_keys(name);
  const detail::Args key_args(keys.begin(), keys.end());
  const std::string ticket = std::to_string(p.fencing_token());
  for (int run = 0; run < 2; ++run) {
    const detail::Reply r =
        admin_.eval(detail::scripts::semaphore_release, key_args,
                    {"release", "4", "10000", p.id(), ticket, "10000", "keep", "3"});
    ASSERT_EQ(1u, r.elements.size());
    EXPECT_EQ(1, r.elements[0].integer);
  }
  EXPECT_EQ("0,1,2", admin_.command({"HGET", key(name, "slots"), p.id()}).str);
  EXPECT_EQ(1, admin_.command({"ZCARD", key(name, "free")}).integer);
  // One unit is free, as Redis sees it.
  std::optional<Permit> one = sem.try_acquire(1);
  ASSERT_TRUE(one);
  EXPECT_EQ((Slots{3}), one->slots());
  EXPECT_FALSE(sem.try_acquire(1));
}

// A weighted holder whose lease ran out is reaped whole: all its units are free again.
TEST_F(WeightedTest, AnExpiredWeightedHolderFreesAllItsUnits) {
  const std::string name = "expired-units";
  SemaphoreOptions o = options(3);
  o.auto_renew = false;
  FairSemaphore sem(redis_options(), name, o);
  Permit p = sem.acquire(3);
  BackgroundWaiter waiter(sem, 3);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  admin_.command({"ZADD", key(name, "time"), "XX", "1", p.id()});  // its lease ran out
  (void)sem.status();                                              // reaps, and promotes the waiter
  Permit* next = waiter.result();
  ASSERT_NE(nullptr, next);
  EXPECT_EQ((Slots{0, 1, 2}), next->slots());
  EXPECT_EQ(ReleaseResult::expired, p.release());
}

// An evicted weighted holder's units pass on; a weighted waiter evicted ends with EvictedError.
TEST_F(WeightedTest, EvictionFreesAWeightedHoldersUnits) {
  FairSemaphore sem(redis_options(), "evict-units", options(4));
  Permit p = sem.acquire(3);
  BackgroundWaiter waiter(sem, 4);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  EXPECT_EQ(EvictResult::holder, sem.evict(p.id()));
  Permit* next = waiter.result();
  ASSERT_NE(nullptr, next);
  EXPECT_EQ((Slots{0, 1, 2, 3}), next->slots());
  EXPECT_FALSE(p.renew());
  BackgroundWaiter evicted(sem, 2);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  EXPECT_EQ(EvictResult::waiter, sem.evict(sem.status().waiters[0].id));
  ASSERT_TRUE(wait_until([&] { return evicted.done.load(); }));
  EXPECT_NE(std::string::npos, evicted.error.find("evicted")) << evicted.error;
  // The {units}, {inbox} and {queued} fields of the evicted waiter went with it: what is left
  // is the holder's owner info and its {inbox} and {queued} fields (kept while it holds).
  EXPECT_EQ(0, admin_
                   .command({"HEXISTS", key("evict-units", "info"),
                             "{units}" + sem.status().holders.at(0).id})
                   .integer);
  EXPECT_EQ(3, admin_.command({"HLEN", key("evict-units", "info")}).integer);
}

}  // namespace
}  // namespace fairsem
