// SemaphoreOptions::max_waiters, a bounded queue: a request that would wait behind that many
// queued requests or more fails at once with QueueFullError and writes nothing (no ticket
// drawn, no entry), blocking or asynchronous, whatever the units; a request already queued is
// never refused; try_acquire is unaffected; and the bound holds across clients racing for the
// last places, since the acquire script checks it.

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "redis_server.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using detail::Connection;
using test::wait_until;

class QueueBoundTest : public ::testing::Test {
 protected:
  SemaphoreOptions bounded(long long max_waiters, long long limit = 1) const {
    SemaphoreOptions o;
    o.limit = limit;
    o.lease = 30s;
    o.key_prefix = prefix_;
    o.max_waiters = max_waiters;
    return o;
  }
  std::vector<std::string> waiter_ids(FairSemaphore& sem) {
    std::vector<std::string> ids;
    for (const PermitInfo& w : sem.status().waiters) ids.push_back(w.id);
    return ids;
  }

  const std::string name_ = "bounded";
  const std::string prefix_ = test::unique_prefix();
  Client client_{test::redis_options()};
};

TEST_F(QueueBoundTest, ARequestBehindMaxWaitersIsRefusedAtOnceAndWritesNothing) {
  FairSemaphore sem(client_, name_, bounded(2));
  std::optional<Permit> holder = sem.acquire();
  std::future<Permit> first = sem.acquire_async();
  std::future<Permit> second = sem.acquire_async();
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 2; }));
  const long long tickets_before = sem.status().last_ticket;
  const std::vector<std::string> waiting = waiter_ids(sem);

  try {
    // Bounded, so that a bound not kept fails the test rather than hangs it.
    (void)sem.try_acquire_for(10s);
    FAIL() << "a third waiter was queued behind max_waiters 2";
  } catch (const QueueFullError& e) {
    EXPECT_EQ(e.waiting(), 2);
    EXPECT_EQ(e.max_waiters(), 2);
    EXPECT_NE(std::string(e.what()).find("the queue is full: 2 requests wait, and max_waiters "
                                         "is 2; nothing was written"),
              std::string::npos)
        << e.what();
  }
  std::future<Permit> refused = sem.acquire_async();
  ASSERT_EQ(refused.wait_for(10s), std::future_status::ready) << "an asynchronous request queued";
  EXPECT_THROW(refused.get(), QueueFullError);
  EXPECT_FALSE(sem.try_acquire().has_value());  // a try never queues: not refused, not granted
  EXPECT_EQ(sem.status().last_ticket, tickets_before) << "a refused request drew a ticket";
  EXPECT_EQ(waiter_ids(sem), waiting);

  // The queue moves: each waiter is served in turn, and there is room again.
  holder.reset();
  Permit a = first.get();
  std::future<Permit> third = sem.acquire_async();
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 2; }));
  a.release();
  second.get().release();
  third.get().release();
}

TEST_F(QueueBoundTest, WeightedRequestsCountAsOneWaiterEach) {
  FairSemaphore sem(client_, name_, bounded(1, 3));
  Permit all = sem.acquire(3);
  std::future<Permit> two = sem.acquire_async(2);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  // One unit would wait behind the two-unit request: refused, however small.
  EXPECT_THROW((void)sem.try_acquire_for(1, 10s), QueueFullError);
  EXPECT_THROW((void)sem.try_acquire_for(3, 10s), QueueFullError);
  // Each handle passes its own bound: another, with room for two waiters, queues.
  FairSemaphore roomier(client_, name_, bounded(2, 3));
  std::future<Permit> one = roomier.acquire_async(1);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 2; }));
  all.release();
  Permit p2 = two.get();
  Permit p1 = one.get();
  EXPECT_LT(p2.fencing_token(), p1.fencing_token());
}

// A waiter polls (here every 500 ms) with its ticket: a poll is never refused, even when the
// queue has grown past its own handle's bound since it queued.
TEST_F(QueueBoundTest, AWaiterAlreadyQueuedIsNeverRefusedWhenItPolls) {
  SemaphoreOptions short_lease = bounded(1);
  short_lease.lease = 1500ms;
  FairSemaphore sem(client_, name_, short_lease);
  FairSemaphore unbounded(client_, name_, bounded(0));
  std::optional<Permit> holder = unbounded.acquire();
  std::future<Permit> early = sem.acquire_async();
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  std::future<Permit> late = unbounded.acquire_async();
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 2; }));
  // The early waiter's entry was renewed: its lease left, which only falls between two polls,
  // went up from one reading to the next. (Compared with the first reading alone, a first
  // reading taken in the very ms of a poll, the whole lease left, is never exceeded.)
  const auto lease_left = [&] { return sem.status().waiters.at(0).lease_left; };
  auto last = lease_left();
  ASSERT_TRUE(wait_until([&] {
    const auto now = lease_left();
    const bool renewed = now > last;
    last = now;
    return renewed;
  }));
  holder.reset();
  early.get().release();
  late.get().release();
}

// A waiter whose entry is gone (reaped, or lost in a restart without persistence) queues again
// at its next poll: that is no new request, and is never refused, however long the queue.
TEST_F(QueueBoundTest, AWaiterQueueingAgainIsNeverRefused) {
  SemaphoreOptions short_lease = bounded(1);
  short_lease.lease = 1500ms;
  FairSemaphore sem(client_, name_, short_lease);
  FairSemaphore unbounded(client_, name_, bounded(0));
  std::optional<Permit> holder = unbounded.acquire();
  std::future<Permit> early = sem.acquire_async();
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  const std::string early_id = sem.status().waiters.at(0).id;
  std::future<Permit> late = unbounded.acquire_async();
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 2; }));
  // Its entry removed as a reap would: its next poll finds none and queues it again, last.
  Connection admin(test::redis_options());
  const std::string base = prefix_ + ":{" + name_ + "}:";
  admin.command({"ZREM", base + "owner", early_id});
  admin.command({"ZREM", base + "time", early_id});
  ASSERT_TRUE(wait_until([&] {
    const std::vector<std::string> ids = waiter_ids(sem);
    return ids.size() == 2 && ids.back() == early_id;
  })) << "the waiter did not queue again";
  holder.reset();
  late.get().release();
  early.get().release();  // QueueFullError, had it been refused
}

// Clients of their own (no admission line between them) race for the last places: the script
// checks the bound, so exactly max_waiters of them queue.
TEST_F(QueueBoundTest, ClientsRacingForTheLastPlacesNeverPassTheBound) {
  constexpr int kClients = 4;
  constexpr int kEach = 4;
  constexpr long long kMax = 5;
  FairSemaphore holder_sem(client_, name_, bounded(kMax));
  std::optional<Permit> holder = holder_sem.acquire();
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<std::unique_ptr<FairSemaphore>> sems;
  for (int c = 0; c < kClients; ++c) {
    clients.push_back(std::make_unique<Client>(test::redis_options()));
    sems.push_back(std::make_unique<FairSemaphore>(*clients.back(), name_, bounded(kMax)));
  }
  std::vector<std::future<Permit>> requests;
  for (int i = 0; i < kEach; ++i) {
    for (auto& sem : sems) requests.push_back(sem->acquire_async());
  }
  // Settled when each request is either refused (a refusal comes at once; nothing is granted
  // while the holder holds) or queued.
  const auto refusals = [&] {
    std::size_t ready = 0;
    for (auto& r : requests) ready += r.wait_for(0s) == std::future_status::ready ? 1 : 0;
    return ready;
  };
  ASSERT_TRUE(wait_until(
      [&] { return refusals() + holder_sem.status().waiters.size() == requests.size(); }));
  std::size_t refused = 0;
  std::vector<std::future<Permit>*> queued;
  for (auto& r : requests) {
    if (r.wait_for(0s) != std::future_status::ready) {
      queued.push_back(&r);
      continue;
    }
    try {
      r.get();
      ADD_FAILURE() << "granted while the holder held the only permit";
    } catch (const QueueFullError&) {
      ++refused;
    }
  }
  EXPECT_EQ(queued.size(), static_cast<std::size_t>(kMax));
  EXPECT_EQ(refused, requests.size() - kMax);
  EXPECT_EQ(holder_sem.status().waiters.size(), static_cast<std::size_t>(kMax));
  // Served one at a time, in queue order, which need not be the order of `queued`.
  holder.reset();
  std::size_t served = 0;
  EXPECT_TRUE(wait_until([&] {
    for (auto*& r : queued) {
      if (r != nullptr && r->wait_for(0s) == std::future_status::ready) {
        r->get().release();
        r = nullptr;
        ++served;
      }
    }
    return served == queued.size();
  }));
}

TEST_F(QueueBoundTest, ANegativeBoundIsRefusedByName) {
  try {
    FairSemaphore sem(client_, name_, bounded(-1));
    FAIL() << "max_waiters -1 was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("max_waiters must not be negative, got -1"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace fairsem
