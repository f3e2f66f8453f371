// fairsem/asio.hpp: async_acquire with a callback bound to an io_context (run on its thread),
// asio::use_future (errors thrown from get()), asio::experimental::deferred (nothing starts
// until invoked), async_acquire_for giving up, and in C++20 builds
// a thousand coroutines on one io_context thread, each holding a permit, never more at once
// than the limit. Each test makes its io_context before its semaphore, as users must: the
// semaphore's destructor then waits for the worker thread still posting a completion to it,
// before the io_context is destroyed (the other order is a race TSan reports).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <asio/bind_executor.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_future.hpp>
#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "fairsem/asio.hpp"
#include "fairsem/fairsem.hpp"
#include "process_stats.hpp"
#include "test_env.hpp"
#include "wait.hpp"

#if __cplusplus >= 202002L
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/use_awaitable.hpp>
#endif

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using test::wait_until;

SemaphoreOptions options(long long limit) {
  SemaphoreOptions o;
  o.limit = limit;
  o.key_prefix = test::unique_prefix();
  return o;
}

TEST(AsioTest, TheCallbackRunsOnTheThreadThatRunsTheIoContext) {
  asio::io_context io;
  FairSemaphore sem(test::redis_options(), "callback", options(1));
  std::optional<Permit> got;
  std::thread::id ran_on;
  async_acquire(sem, asio::bind_executor(io, [&](std::exception_ptr error, Permit p) {
                  EXPECT_FALSE(error);
                  ran_on = std::this_thread::get_id();
                  got = std::move(p);
                }));
  io.run();  // returns once the handler ran: the operation kept the io_context's work going
  ASSERT_TRUE(got && got->held());
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(AsioTest, UseFutureGetsThePermitOrThrowsTheError) {
  FairSemaphore sem(test::redis_options(), "future", options(1));
  std::future<Permit> first = async_acquire(sem, asio::use_future);
  ASSERT_EQ(first.wait_for(30s), std::future_status::ready);
  Permit held = first.get();
  EXPECT_TRUE(held.held());
  std::future<Permit> second = async_acquire(sem, asio::use_future);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  EXPECT_EQ(sem.evict(sem.status().waiters.at(0).id), EvictResult::waiter);
  ASSERT_EQ(second.wait_for(30s), std::future_status::ready);
  EXPECT_THROW(second.get(), EvictedError);
}

TEST(AsioTest, ADeferredOperationStartsOnlyWhenInvoked) {
  asio::io_context io;
  FairSemaphore sem(test::redis_options(), "deferred", options(1));
  auto operation = async_acquire(sem, asio::experimental::deferred);
  EXPECT_TRUE(sem.status().holders.empty()) << "started before it was invoked";
  std::optional<Permit> got;
  std::move(operation)(asio::bind_executor(io, [&](std::exception_ptr error, Permit p) {
    EXPECT_FALSE(error);
    got = std::move(p);
  }));
  io.run();
  ASSERT_TRUE(got && got->held());
  EXPECT_EQ(sem.status().holders.size(), 1u);
}

TEST(AsioTest, AsyncAcquireForGivesUpAtItsTimeout) {
  asio::io_context io;
  FairSemaphore sem(test::redis_options(), "timed", options(1));
  Permit held = sem.acquire();
  bool called = false;
  async_acquire_for(sem, 200ms,
                    asio::bind_executor(io, [&](std::exception_ptr error, std::optional<Permit> p) {
                      called = true;
                      EXPECT_FALSE(error);
                      EXPECT_FALSE(p.has_value());
                    }));
  io.run();
  EXPECT_TRUE(called);
  EXPECT_TRUE(sem.status().waiters.empty());
}

// Units: a weighted request queues behind the holder and is granted its units when they are
// free; a timed one of more units than are ever free gives up.
TEST(AsioTest, AsyncAcquireTakesUnits) {
  asio::io_context io;
  FairSemaphore sem(test::redis_options(), "units", options(4));
  Permit held = sem.acquire(2);
  std::future<Permit> three = async_acquire(sem, 3, asio::use_future);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  EXPECT_EQ(3, sem.status().waiters.at(0).count);
  std::optional<Permit> timed;
  bool called = false;
  async_acquire_for(sem, 2, 100ms,
                    asio::bind_executor(io, [&](std::exception_ptr error, std::optional<Permit> p) {
                      called = true;
                      EXPECT_FALSE(error);
                      timed = std::move(p);
                    }));
  io.run();
  EXPECT_TRUE(called);
  EXPECT_FALSE(timed.has_value());  // 2 units were free, but not before the earlier request
  held.release();
  ASSERT_EQ(three.wait_for(30s), std::future_status::ready);
  EXPECT_EQ(3, three.get().count());
  EXPECT_THROW(async_acquire(sem, 5, asio::use_future), InvalidArgument);
}

#if __cplusplus >= 202002L
TEST(AsioTest, AThousandCoroutinesOnOneThreadEachHoldAPermitNeverMoreThanTheLimit) {
  asio::io_context io;
  constexpr int kRequests = 1000;
  constexpr long long kLimit = 20;
  Client client(test::redis_options());
  FairSemaphore sem(client, "coroutines", options(kLimit));
  int holding = 0;  // one thread: no atomics needed
  int most = 0;
  int served = 0;
  const std::size_t threads_before = test::thread_count();
  for (int i = 0; i < kRequests; ++i) {
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          Permit p = co_await async_acquire(sem, asio::use_awaitable);
          most = std::max(most, ++holding);
          asio::steady_timer work(co_await asio::this_coro::executor, 1ms);
          co_await work.async_wait(asio::use_awaitable);
          // The first holders keep their permits until the limit has been reached once (for
          // at most 10 s), so a slow machine cannot finish their work before the last of the
          // first `kLimit` grants arrives.
          for (int wait = 0; served == 0 && most < kLimit && wait < 10000; ++wait) {
            work.expires_after(1ms);
            co_await work.async_wait(asio::use_awaitable);
          }
          --holding;
          ++served;
        },
        asio::detached);
  }
  io.run();
  EXPECT_EQ(served, kRequests);
  EXPECT_LE(most, kLimit);
  EXPECT_EQ(most, kLimit) << "the requests never filled the limit";
  // The io_context's one thread, fairsem's two workers, its waker and its watchdog.
  EXPECT_LE(test::thread_count(), threads_before + 4);
  EXPECT_TRUE(sem.status().waiters.empty());
}
#endif

}  // namespace
}  // namespace fairsem
