// fairsem/asio.hpp: async_acquire with a callback bound to an io_context (run on its thread),
// asio::use_future (errors thrown from get()), asio::experimental::deferred (nothing starts
// until invoked), async_acquire_for giving up, cancellation through the handler's slot (every
// type; after the grant it changes nothing), async_release and
// ClientOptions::release_in_background (the io_context's thread goes on while Redis holds the
// release back: writes paused with CLIENT PAUSE WRITE), and in C++20 builds a thousand
// coroutines on one io_context thread, each holding a permit, never more at once than the limit,
// and an acquire raced with a timer by awaitable_operators' ||. Each test makes its io_context
// before its semaphore, as users must: the semaphore's destructor then waits for the worker thread
// still posting a completion to it, before the io_context is destroyed (the other order is a race
// TSan reports).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_future.hpp>
#include <atomic>
#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "exception_is.hpp"
#include "fairsem/asio.hpp"
#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/protocol/scripts.hpp"
#include "process_stats.hpp"
#include "test_env.hpp"
#include "wait.hpp"

#if __cplusplus >= 202002L
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/use_awaitable.hpp>
#include <variant>
#endif

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using test::unique_options;
using test::wait_until;

/// True when `error` holds a CancelledError.
bool cancelled(const std::exception_ptr& error) {
  return test::exception_is<CancelledError>(error);
}

/// Holds back every write command and script call of the test's redis-server (CLIENT PAUSE
/// WRITE: a release waits in Redis, as it would for a slow or distant server) until resume() or
/// the destructor, at most `limit`. Reads and CLIENT go on. The limit is below the tests'
/// command timeout (5 s): a release made on the io_context's thread by mistake would block it
/// until then and succeed, which the tests see.
class PausedWrites {
 public:
  explicit PausedWrites(std::chrono::milliseconds limit = 2s) {
    admin_.command({"CLIENT", "PAUSE", std::to_string(limit.count()), "WRITE"});
  }
  ~PausedWrites() { resume(); }
  PausedWrites(const PausedWrites&) = delete;
  PausedWrites& operator=(const PausedWrites&) = delete;
  void resume() {
    if (std::exchange(paused_, false)) admin_.command({"CLIENT", "UNPAUSE"});
  }
  /// Leaves the pause to end at its limit.
  void forget() { paused_ = false; }

 private:
  detail::Connection admin_{test::redis_options()};
  bool paused_ = true;
};

TEST(AsioTest, TheCallbackRunsOnTheThreadThatRunsTheIoContext) {
  asio::io_context io;
  FairSemaphore sem(test::redis_options(), "callback", unique_options(1));
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
  FairSemaphore sem(test::redis_options(), "future", unique_options(1));
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
  FairSemaphore sem(test::redis_options(), "deferred", unique_options(1));
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
  FairSemaphore sem(test::redis_options(), "timed", unique_options(1));
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
  FairSemaphore sem(test::redis_options(), "units", unique_options(4));
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

// A cancellation of any type emitted while the request waits behind a holder: the handler gets
// CancelledError while the holder still holds (nothing but the cancellation could have ended
// it), the request's queue entry goes, and the request queued after it is served at the
// release.
TEST(AsioTest, ACancellationSlotCancelsAWaitingAcquire) {
  for (const auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial,
                          asio::cancellation_type::total}) {
    SCOPED_TRACE(static_cast<int>(type));
    asio::io_context io;
    FairSemaphore sem(test::redis_options(), "cancel-slot", unique_options(1));
    Permit holder = sem.acquire();
    asio::cancellation_signal signal;
    bool completed = false;
    std::exception_ptr error;
    Permit got;
    async_acquire(sem,
                  asio::bind_cancellation_slot(
                      signal.slot(), asio::bind_executor(io, [&](std::exception_ptr e, Permit p) {
                        completed = true;
                        error = e;
                        got = std::move(p);
                      })));
    ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
    std::future<Permit> next = async_acquire(sem, asio::use_future);
    ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 2; }));
    const std::string cancelled_id = sem.status().waiters.at(0).id;
    asio::post(io, [&] { signal.emit(type); });
    io.run_for(10s);  // returns once the handler ran (no work is left then)
    ASSERT_TRUE(completed) << "the cancellation did not complete the handler";
    EXPECT_TRUE(cancelled(error));
    EXPECT_FALSE(got.held());
    EXPECT_TRUE(holder.held());
    EXPECT_FALSE(signal.slot().has_handler()) << "the slot's handler outlived the operation";
    ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
    EXPECT_NE(cancelled_id, sem.status().waiters.at(0).id);
    holder.release();
    ASSERT_EQ(next.wait_for(30s), std::future_status::ready);
    EXPECT_TRUE(next.get().held());
  }
}

// Many requests on one io_context, every other one cancelled at once while permits come and
// go: each completes once, every request not cancelled gets a permit (a cancelled one may have
// been granted first), and the queue ends empty.
TEST(AsioTest, CancellingSomeRequestsStillServesEveryOther) {
  constexpr int kRequests = 30;
  asio::io_context io;
  FairSemaphore sem(test::redis_options(), "cancel-many", unique_options(2));
  std::vector<asio::cancellation_signal> signals(kRequests);
  std::vector<int> completions(kRequests, 0);
  std::vector<bool> granted(kRequests, false);
  std::vector<bool> was_cancelled(kRequests, false);
  for (int i = 0; i < kRequests; ++i) {
    async_acquire(
        sem, asio::bind_cancellation_slot(
                 signals[i].slot(), asio::bind_executor(io, [&, i](std::exception_ptr e, Permit p) {
                   ++completions[i];
                   was_cancelled[i] = cancelled(e);
                   granted[i] = p.held();
                   // Held for a moment, then released on this thread.
                   auto timer = std::make_shared<asio::steady_timer>(io, 1ms);
                   timer->async_wait(
                       [timer, held = std::make_shared<Permit>(std::move(p))](std::error_code) {});
                 })));
    if (i % 2 == 1) asio::post(io, [&, i] { signals[i].emit(asio::cancellation_type::terminal); });
  }
  io.run_for(60s);
  for (int i = 0; i < kRequests; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(1, completions[i]);
    if (i % 2 == 0) {
      EXPECT_TRUE(granted[i]);
    }
    EXPECT_NE(granted[i], was_cancelled[i]);  // one or the other
  }
  EXPECT_GT(std::count(was_cancelled.begin(), was_cancelled.end(), true), 0)
      << "no cancellation took effect";
  EXPECT_TRUE(wait_until([&] {
    const Status status = sem.status();
    return status.waiters.empty() && status.holders.empty();
  }));
}

// A cancellation that comes once the request was granted, before its handler ran: the handler
// still gets the permit.
TEST(AsioTest, ACancellationAfterTheGrantChangesNothing) {
  asio::io_context io;
  FairSemaphore sem(test::redis_options(), "cancel-late", unique_options(1));
  asio::cancellation_signal signal;
  bool completed = false;
  std::exception_ptr error;
  Permit got;
  async_acquire(sem,
                asio::bind_cancellation_slot(
                    signal.slot(), asio::bind_executor(io, [&](std::exception_ptr e, Permit p) {
                      completed = true;
                      error = e;
                      got = std::move(p);
                    })));
  // Counted once the request completed (its completion is posted to io, which does not run).
  ASSERT_TRUE(wait_until([&] { return sem.metrics().grants == 1; }));
  signal.emit(asio::cancellation_type::terminal);
  io.run();
  ASSERT_TRUE(completed);
  EXPECT_FALSE(error);
  EXPECT_TRUE(got.held());
  EXPECT_FALSE(signal.slot().has_handler());
  signal.emit(asio::cancellation_type::terminal);  // no handler: nothing happens
  EXPECT_TRUE(got.held());
  ASSERT_EQ(1u, sem.status().holders.size());
  EXPECT_EQ(got.id(), sem.status().holders.at(0).id);
}

TEST(AsioTest, AsyncAcquireForIsCancelledToo) {
  asio::io_context io;
  FairSemaphore sem(test::redis_options(), "cancel-timed", unique_options(1));
  Permit holder = sem.acquire();
  asio::cancellation_signal signal;
  bool completed = false;
  std::exception_ptr error;
  std::optional<Permit> got;
  async_acquire_for(sem, 60s,
                    asio::bind_cancellation_slot(
                        signal.slot(),
                        asio::bind_executor(io, [&](std::exception_ptr e, std::optional<Permit> p) {
                          completed = true;
                          error = e;
                          got = std::move(p);
                        })));
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  asio::post(io, [&] { signal.emit(asio::cancellation_type::partial); });
  io.run_for(10s);
  ASSERT_TRUE(completed);
  EXPECT_TRUE(cancelled(error));
  EXPECT_FALSE(got.has_value());
  EXPECT_TRUE(holder.held());
  EXPECT_TRUE(wait_until([&] { return sem.status().waiters.empty(); }));
}

// The release waits in Redis (writes paused) while the io_context's thread runs a timer's
// handler: the release is not made on that thread. The handler then completes there.
TEST(AsioTest, AsyncReleaseRunsOnTheWorkerThreadsAndCompletesOnTheHandlersExecutor) {
  asio::io_context io;
  Client client(test::redis_options());
  FairSemaphore sem(client, "async-release", unique_options(1));
  Permit permit = sem.acquire();
  std::optional<ReleaseResult> result;
  std::exception_ptr error;
  std::thread::id ran_on;
  bool pending_when_the_timer_fired = false;
  {
    PausedWrites paused;
    async_release(std::move(permit),
                  asio::bind_executor(io, [&](std::exception_ptr e, ReleaseResult r) {
                    error = e;
                    result = r;
                    ran_on = std::this_thread::get_id();
                  }));
    EXPECT_FALSE(permit.held());  // NOLINT(bugprone-use-after-move): moved in at once
    asio::steady_timer timer(io, 20ms);
    timer.async_wait([&](std::error_code) {
      pending_when_the_timer_fired = !result.has_value();
      paused.resume();
    });
    io.run_for(30s);
  }
  EXPECT_TRUE(pending_when_the_timer_fired) << "the release blocked the io_context's thread";
  EXPECT_FALSE(error);
  EXPECT_EQ(result, ReleaseResult::released);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_TRUE(sem.status().holders.empty());

  // An empty Permit completes too, with nothing sent.
  result.reset();
  io.restart();
  async_release(Permit(), asio::bind_executor(io, [&](std::exception_ptr e, ReleaseResult r) {
                  error = e;
                  result = r;
                }));
  EXPECT_FALSE(result.has_value()) << "completed inside the initiating function";
  io.run_for(10s);
  EXPECT_EQ(result, ReleaseResult::already_released);
}

// Permit::release_async, under async_release: the callback runs on a worker thread.
TEST(AsioTest, ReleaseAsyncCallsBackOnAWorkerThread) {
  FairSemaphore sem(test::redis_options(), "release-async", unique_options(1));
  Permit permit = sem.acquire();
  std::promise<std::thread::id> ran_on;
  permit.release_async([&](std::exception_ptr, ReleaseResult r) {
    EXPECT_EQ(r, ReleaseResult::released);
    ran_on.set_value(std::this_thread::get_id());
  });
  EXPECT_FALSE(permit.held());  // NOLINT(bugprone-use-after-move)
  auto done = ran_on.get_future();
  ASSERT_EQ(done.wait_for(30s), std::future_status::ready);
  EXPECT_NE(done.get(), std::this_thread::get_id());
  EXPECT_THROW(Permit().release_async(nullptr), InvalidArgument);
}

// ClientOptions::release_in_background: a Permit destroyed on the io_context's thread while
// Redis holds writes back leaves that thread free (a timer's handler runs meanwhile), and the
// release happens: the waiter gets the permit.
TEST(AsioTest, APermitDestroyedWithReleaseInBackgroundDoesNotBlockTheIoContext) {
  asio::io_context io;
  ClientOptions background;
  background.release_in_background = true;
  Client client(test::redis_options(), background);
  FairSemaphore sem(client, "background-release", unique_options(1));
  std::optional<Permit> permit = sem.acquire();
  std::future<Permit> next = sem.acquire_async();
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  // The holders' sorted set, read directly (reads are not paused).
  const std::string holders_key =
      detail::semaphore_keys(sem.options().key_prefix, sem.name()).at(0);
  const std::string id = permit->id();
  detail::Connection admin(test::redis_options());
  auto still_held = [&] {
    return admin.command({"ZSCORE", holders_key, id}).type != detail::Reply::Type::nil;
  };
  ASSERT_TRUE(still_held());
  bool pending_when_the_timer_fired = false;
  {
    PausedWrites paused;
    asio::post(io, [&] { permit.reset(); });
    asio::steady_timer timer(io, 20ms);
    timer.async_wait([&](std::error_code) {
      pending_when_the_timer_fired = still_held();
      paused.resume();
    });
    io.run_for(30s);
  }
  EXPECT_TRUE(pending_when_the_timer_fired) << "~Permit blocked the io_context's thread";
  ASSERT_EQ(next.wait_for(30s), std::future_status::ready);
  Permit granted = next.get();
  EXPECT_TRUE(granted.held());
  // Move-assignment over a held Permit hands off its release the same way.
  std::future<Permit> after = sem.acquire_async();
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  granted = Permit();
  ASSERT_EQ(after.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(after.get().held());
}

// A FairSemaphore and its Client, destroyed while a release handed off waits in Redis, return
// only once it is done.
TEST(AsioTest, TheSemaphoreAndTheClientWaitForHandedOffReleases) {
  const SemaphoreOptions o = unique_options(1);
  const std::string holders_key = detail::semaphore_keys(o.key_prefix, "drained").at(0);
  detail::Connection admin(test::redis_options());
  std::string id;
  {
    ClientOptions background;
    background.release_in_background = true;
    Client client(test::redis_options(), background);
    FairSemaphore sem(client, "drained", o);
    std::optional<Permit> permit = sem.acquire();
    id = permit->id();
    PausedWrites paused(300ms);  // lifted by Redis itself, while the destructors wait
    permit.reset();
    ASSERT_NE(admin.command({"ZSCORE", holders_key, id}).type, detail::Reply::Type::nil);
    paused.forget();
  }
  EXPECT_EQ(admin.command({"ZSCORE", holders_key, id}).type, detail::Reply::Type::nil)
      << "the destructors returned before the release was made";
}

// A Permit that outlives its FairSemaphore and Client, destroyed with its release handed off,
// is still released.
TEST(AsioTest, AHandedOffReleaseOutlivesTheSemaphoreAndTheClient) {
  const SemaphoreOptions o = unique_options(1);
  std::optional<Permit> permit;
  {
    ClientOptions background;
    background.release_in_background = true;
    Client client(test::redis_options(), background);
    FairSemaphore sem(client, "outlived", o);
    permit = sem.acquire();
  }
  FairSemaphore other(test::redis_options(), "outlived", o);
  ASSERT_EQ(1u, other.status().holders.size());
  permit.reset();
  EXPECT_TRUE(wait_until([&] { return other.status().holders.empty(); }));
  EXPECT_TRUE(other.try_acquire().has_value());
}

#if __cplusplus >= 202002L
TEST(AsioTest, AThousandCoroutinesOnOneThreadEachHoldAPermitNeverMoreThanTheLimit) {
  asio::io_context io;
  constexpr int kRequests = 1000;
  constexpr long long kLimit = 20;
  Client client(test::redis_options());
  FairSemaphore sem(client, "coroutines", unique_options(kLimit));
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

// awaitable_operators: the timer wins while a holder holds; the acquire is cancelled and
// leaves the queue, and the holder's release then goes to a later acquire, not to the
// cancelled one.
TEST(AsioTest, AnAcquireRacedWithATimerLosesAndLeavesTheQueue) {
  using namespace asio::experimental::awaitable_operators;
  asio::io_context io;
  FairSemaphore sem(test::redis_options(), "raced", unique_options(1));
  Permit holder = sem.acquire();
  std::optional<std::size_t> winner;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer timer(co_await asio::this_coro::executor, 100ms);
        auto result = co_await (async_acquire(sem, asio::use_awaitable) ||
                                timer.async_wait(asio::use_awaitable));
        winner = result.index();
      },
      asio::detached);
  io.run_for(10s);
  ASSERT_TRUE(winner.has_value()) << "the race did not end while the holder held";
  EXPECT_EQ(1u, *winner) << "the timer did not win";
  EXPECT_TRUE(holder.held());
  EXPECT_TRUE(wait_until([&] { return sem.status().waiters.empty(); }));
  holder.release();
  EXPECT_TRUE(sem.try_acquire_for(10s).has_value());
}
#endif

}  // namespace
}  // namespace fairsem
