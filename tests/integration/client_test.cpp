// Client: what the semaphores opened through one Client share. One watchdog thread renews the
// permits of all of them, each at its own interval; their connections come from one pool; one
// waker waits for the wake-ups of all their waiting acquires; and what they share outlives the
// Client and the semaphores as long as a permit needs it.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/threads/thread_reaper.hpp"
#include "process_stats.hpp"
#include "redis_server.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using detail::Connection;
using test::RedisServer;
using test::thread_count;
using test::wait_until;
using ::testing::HasSubstr;

/// Client connections `server` has besides the one asking.
long long connections_on(const RedisServer& server) {
  Connection admin(server.options());
  const std::string clients = admin.command({"CLIENT", "LIST"}).str;
  return static_cast<long long>(std::count(clients.begin(), clients.end(), '\n')) - 1;
}

SemaphoreOptions options(std::chrono::milliseconds lease) {
  SemaphoreOptions o;
  o.limit = 1;
  o.lease = lease;
  o.key_prefix = test::unique_prefix();
  return o;
}

TEST(ClientTest, ManySemaphoresOfOneClientShareOneWatchdogThreadAndItsConnections) {
  RedisServer server;  // its own: every connection on it is this test's
  Client client(server.options());
  constexpr int kSemaphores = 40;
  std::vector<std::unique_ptr<FairSemaphore>> semaphores;
  std::vector<Permit> permits;
  std::size_t threads_with_one = 0;  // after the first permit started the watchdog
  for (int i = 0; i < kSemaphores; ++i) {
    semaphores.push_back(
        std::make_unique<FairSemaphore>(client, "shared-" + std::to_string(i), options(600ms)));
    permits.push_back(semaphores.back()->acquire());
    if (i == 0) threads_with_one = thread_count();
  }
  // Every permit renewed twice (each every 200 ms): they outlive their first 600 ms lease.
  ASSERT_TRUE(wait_until([&] {
    return std::all_of(semaphores.begin(), semaphores.end(),
                       [](const auto& s) { return s->metrics().renewals >= 2; });
  }));
  for (const Permit& p : permits) EXPECT_FALSE(p.lost()) << p.id();
  EXPECT_EQ(thread_count(), threads_with_one) << "one watchdog thread for every semaphore";
  // One connection for the calls (made one at a time) and one for the watchdog.
  EXPECT_EQ(connections_on(server), 2);
  for (Permit& p : permits) EXPECT_EQ(p.release(), ReleaseResult::released);
}

TEST(ClientTest, SemaphoresOpenedWithoutAClientEachHaveTheirOwn) {
  // The contrast to the test above: what one Client saves.
  RedisServer server;
  std::vector<std::unique_ptr<FairSemaphore>> semaphores;
  std::vector<Permit> permits;
  std::size_t threads_with_one = 0;
  for (int i = 0; i < 3; ++i) {
    semaphores.push_back(std::make_unique<FairSemaphore>(
        server.options(), "own-" + std::to_string(i), options(600ms)));
    permits.push_back(semaphores.back()->acquire());
    if (i == 0) threads_with_one = thread_count();
  }
  ASSERT_TRUE(wait_until([&] {
    return std::all_of(semaphores.begin(), semaphores.end(),
                       [](const auto& s) { return s->metrics().renewals >= 1; });
  }));
  EXPECT_EQ(thread_count(), threads_with_one + 2);
  EXPECT_EQ(connections_on(server), 6);
}

TEST(ClientTest, WaitingAcquiresShareTheClientsOneWakeUpConnection) {
  RedisServer server;
  Client client(server.options());
  SemaphoreOptions o = options(10s);
  FairSemaphore sem(client, "waiting", o);
  std::optional<Permit> holder = sem.acquire();
  constexpr int kWaiters = 30;
  std::vector<std::thread> threads;
  std::atomic<int> granted{0};
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&] {
      Permit p = sem.acquire();
      ++granted;
    });  // each releases its permit as it ends, which wakes the next
  }
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == kWaiters; }));
  Connection admin(server.options());
  const auto blocked = [&] {
    return admin.command({"INFO", "clients"}).str.find("blocked_clients:1\r") != std::string::npos;
  };
  // Thirty threads wait; one BRPOP of the waker waits for all of them, and nobody holds a
  // connection of their own: at most the pool's idle connections (8), the waker's and the
  // watchdog's are left, once each waiter has given back the one its call borrowed (a thread
  // whose entry status() shows may still hold it, subscribing, for a moment).
  ASSERT_TRUE(wait_until(blocked));
  long long left = 0;
  EXPECT_TRUE(wait_until([&] { return (left = connections_on(server)) <= 10; }))
      << left << " connections stay open while 30 threads wait";
  holder.reset();  // releases: the waiters are woken one after another
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(granted.load(), kWaiters);
  EXPECT_TRUE(sem.status().waiters.empty());
}

/// INFO stats' total_connections_received of `server`.
long long connections_received(const RedisServer& server) {
  Connection admin(server.options());
  const std::string stats = admin.command({"INFO", "stats"}).str;
  const std::string field = "total_connections_received:";
  return std::stoll(stats.substr(stats.find(field) + field.size()));
}

TEST(ClientTest, ScriptCallsShareAtMostMaxConnections) {
  RedisServer server;
  ClientOptions co;
  co.max_connections = 3;
  Client client(server.options(), co);
  SemaphoreOptions o = options(10s);
  o.limit = 1000;
  o.auto_renew = false;  // no watchdog connection: only the pool's count
  FairSemaphore sem(client, "bounded", o);
  const long long before = connections_received(server);
  std::vector<std::thread> threads;
  std::atomic<int> granted{0};
  for (int t = 0; t < 20; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 30; ++i) {
        if (std::optional<Permit> p = sem.try_acquire()) {
          ++granted;
          p->release();
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(granted.load(), 600);
  // The pool made at most three connections for 1,200 calls from 20 threads (and, below the
  // idle bound, closed none), plus the one connections_received itself opens.
  EXPECT_LE(connections_received(server) - before, 3 + 1);
}

TEST(ClientTest, AThreadHoldingAConnectionIsNeverMadeToWaitForASecond) {
  ClientOptions co;
  co.max_connections = 1;
  Client client(test::redis_options(), co);
  SemaphoreOptions o = options(10s);
  o.limit = 2;
  o.auto_renew = false;
  std::optional<Permit> other;
  o.on_lost = [&](const std::string&, const std::string&) { other->release(); };
  FairSemaphore sem(client, "nested", o);
  std::optional<Permit> p = sem.try_acquire();
  other = sem.try_acquire();
  ASSERT_TRUE(p && other);
  ASSERT_EQ(sem.evict(p->id()), EvictResult::holder);
  // Permit::renew holds the only connection when it finds p evicted; on_lost releases the other
  // permit, which takes a second one on the same thread instead of waiting forever.
  auto renewed = std::async(std::launch::async, [&] { return p->renew(); });
  ASSERT_EQ(renewed.wait_for(30s), std::future_status::ready) << "deadlocked";
  EXPECT_FALSE(renewed.get());
  EXPECT_FALSE(other->held());
  EXPECT_TRUE(sem.status().holders.empty());
}

TEST(ClientTest, EachSemaphoreIsRenewedAtItsOwnInterval) {
  Client client(test::redis_options());
  // Opened first, with a watchdog round due only every 20 s...
  FairSemaphore slow(client, "slow", options(60s));
  Permit slow_permit = slow.acquire();
  // ...and then one whose lease is 300 ms: the watchdog must not wait for the slow one's round.
  FairSemaphore fast(client, "fast", options(300ms));
  Permit fast_permit = fast.acquire();
  ASSERT_TRUE(wait_until([&] { return fast.metrics().renewals >= 5; }));
  EXPECT_FALSE(fast_permit.lost());
  EXPECT_EQ(fast.status().holders.size(), 1u);
  EXPECT_EQ(slow.metrics().renewals, 0u);
  EXPECT_EQ(fast_permit.release(), ReleaseResult::released);
  EXPECT_EQ(slow_permit.release(), ReleaseResult::released);
}

TEST(ClientTest, PermitsOutliveTheirSemaphoreAndTheirClient) {
  const SemaphoreOptions o = options(300ms);
  std::optional<Permit> permit;
  {
    Client client(test::redis_options());
    FairSemaphore sem(client, "outlived", o);
    permit = sem.acquire();
  }
  // Still renewed by the watchdog the permit keeps alive: it outlives several leases.
  const auto first_deadline = permit->deadline();
  ASSERT_TRUE(wait_until([&] { return permit->deadline() > first_deadline + 600ms; }));
  EXPECT_FALSE(permit->lost());
  SemaphoreAdmin admin(test::redis_options(), "outlived", o.key_prefix);
  ASSERT_EQ(admin.status().holders.size(), 1u);
  EXPECT_EQ(admin.status().holders[0].id, permit->id());
  EXPECT_EQ(permit->release(), ReleaseResult::released);
  EXPECT_TRUE(admin.status().holders.empty());
}

// The last reference to a runtime dropped on one of its own worker threads (here a callback
// destroying its semaphore, which had a runtime of its own): that thread cannot join itself, so
// it is parked and joined once it has finished, never detached (a detached thread can outlive
// the process's static objects, such as Asio's system executor a completion was posted to).
TEST(ClientTest, TheLastReferenceDroppedOnAWorkerThreadParksThatThread) {
  detail::join_finished_parked_threads();
  const std::size_t parked = detail::parked_threads();
  std::promise<void> called;
  std::promise<void> returned;
  auto sem = std::make_shared<std::unique_ptr<FairSemaphore>>(
      std::make_unique<FairSemaphore>(test::redis_options(), "parked", options(10s)));
  (*sem)->acquire_async([&called, sem, returned_first = returned.get_future().share()](
                            const std::exception_ptr& error, std::optional<Permit> permit) {
    EXPECT_FALSE(error);
    EXPECT_TRUE(permit.has_value());
    // Until acquire_async has returned: the caller's reference to the request, while it
    // lasts, keeps the runtime too.
    returned_first.wait();
    permit.reset();
    sem->reset();  // on a worker thread: the destructor does not wait for this callback
    called.set_value();
  });
  returned.set_value();
  ASSERT_EQ(called.get_future().wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(wait_until([&] { return detail::parked_threads() == parked + 1; }))
      << "the worker thread that destroyed its runtime was not parked";
  EXPECT_TRUE(wait_until([&] {
    detail::join_finished_parked_threads();
    return detail::parked_threads() == parked;
  }));
}

TEST(ClientTest, CopiesShareOneClientAndAnAdminUsesItToo) {
  RedisServer server;
  Client client(server.options());
  const Client copy = client;  // NOLINT(performance-unnecessary-copy-initialization): the point
  FairSemaphore a(client, "copy-a", options(10s));
  FairSemaphore b(copy, "copy-b", options(10s));
  SemaphoreAdmin admin(copy, "copy-a", a.options().key_prefix);
  auto p = a.try_acquire();
  auto q = b.try_acquire();
  ASSERT_TRUE(p && q);
  EXPECT_EQ(admin.status().holders.size(), 1u);
  EXPECT_EQ(connections_on(server), 1) << "calls made one at a time share one connection";
  EXPECT_EQ(&client.connection(), &copy.connection());
}

TEST(ClientTest, BadOptionsAreRefusedWhenTheClientIsMadeAndNothingConnects) {
  ConnectionOptions bad = test::redis_options();
  bad.connect_timeout = 0ms;
  try {
    Client client(bad);
    FAIL() << "a zero connect timeout was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("connect_timeout"));
  }
  ConnectionOptions nobody;
  nobody.host = "127.0.0.1";
  nobody.port = test::free_loopback_port();
  ClientOptions none;
  none.max_connections = 0;
  try {
    Client client(test::redis_options(), none);
    FAIL() << "max_connections 0 was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("max_connections must be at least 1, got 0"));
  }
  Client lazy(nobody);  // connects nothing yet
  EXPECT_THROW(FairSemaphore(lazy, "nobody", options(1s)), ConnectionError);
}

}  // namespace
}  // namespace fairsem
