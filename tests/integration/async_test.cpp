// Asynchronous acquire: futures and callbacks granted in FIFO order with no thread parked per
// request, timed requests that give up, cancellation (also of a request promoted an instant
// before), eviction, and a FairSemaphore destroyed with requests pending.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "process_stats.hpp"
#include "redis_server.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using detail::Connection;
using test::RedisServer;
using test::unique_options;
using test::wait_until;
using ::testing::HasSubstr;

/// What a callback got, for the test thread to wait for.
struct Outcome {
  std::promise<void> done;
  std::exception_ptr error;
  std::optional<Permit> permit;
  std::thread::id thread;

  AcquireCallback callback() {
    return [this](std::exception_ptr e, std::optional<Permit> p) {
      error = std::move(e);
      permit = std::move(p);
      thread = std::this_thread::get_id();
      done.set_value();
    };
  }
};

std::string message_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  }
}

TEST(AsyncAcquireTest, FuturesAreGrantedInFifoOrderWithNoThreadOrConnectionPerRequest) {
  RedisServer server;
  Client client(server.options());
  FairSemaphore sem(client, "fifo", unique_options(1));
  std::optional<Permit> holder = sem.acquire();
  const std::size_t threads_before = test::thread_count();  // the watchdog's among them
  constexpr std::size_t kRequests = 40;
  std::vector<std::future<Permit>> futures;
  for (std::size_t i = 0; i < kRequests; ++i) {
    futures.push_back(sem.acquire_async());
    // Queued one after the other, so the queue order is the order of the futures.
    ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == i + 1; }));
  }
  Connection admin(server.options());
  const std::string clients = admin.command({"CLIENT", "LIST"}).str;
  // Forty requests wait: the pool's idle connections, the waker's, the watchdog's, the admin;
  // and the two worker threads and the waker's thread.
  EXPECT_LE(std::count(clients.begin(), clients.end(), '\n'), 11) << clients;
  EXPECT_LE(test::thread_count(), threads_before + 3);
  holder.reset();
  long long last_token = 0;
  for (std::future<Permit>& f : futures) {
    ASSERT_EQ(f.wait_for(30s), std::future_status::ready);
    Permit p = f.get();
    EXPECT_GT(p.fencing_token(), last_token) << "granted out of order";
    last_token = p.fencing_token();
  }  // each permit released here wakes the next request
  EXPECT_TRUE(sem.status().waiters.empty());
  EXPECT_EQ(sem.metrics().grants, kRequests + 1);
}

TEST(AsyncAcquireTest, ATimedRequestGivesUpAtItsDeadlineAndLeavesTheQueue) {
  FairSemaphore sem(test::redis_options(), "timed", unique_options(1));
  Permit holder = sem.acquire();
  std::future<std::optional<Permit>> f = sem.try_acquire_for_async(300ms);
  ASSERT_EQ(f.wait_for(30s), std::future_status::ready);
  EXPECT_FALSE(f.get().has_value());
  EXPECT_TRUE(sem.status().waiters.empty());
  EXPECT_EQ(sem.metrics().timeouts, 1u);
  // And one granted before its deadline gets its permit.
  std::future<std::optional<Permit>> g = sem.try_acquire_for_async(30s);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  EXPECT_EQ(holder.release(), ReleaseResult::released);
  ASSERT_EQ(g.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(g.get().has_value());
}

TEST(AsyncAcquireTest, TheCallbackRunsOnAWorkerThreadAndCancelRemovesTheEntry) {
  FairSemaphore sem(test::redis_options(), "cancel", unique_options(1));
  Permit holder = sem.acquire();
  Outcome out;
  AcquireRequest request = sem.acquire_async(out.callback());
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  EXPECT_TRUE(request.cancel());
  ASSERT_EQ(out.done.get_future().wait_for(30s), std::future_status::ready);
  EXPECT_FALSE(out.permit.has_value());
  ASSERT_TRUE(out.error);
  EXPECT_THAT(message_of(out.error), HasSubstr("cancelled"));
  EXPECT_THROW(std::rethrow_exception(out.error), CancelledError);
  EXPECT_NE(out.thread, std::this_thread::get_id());
  // The callback comes first; the removal follows on the same step.
  EXPECT_TRUE(wait_until([&] { return sem.status().waiters.empty(); }));
  EXPECT_FALSE(request.cancel()) << "cancelled twice";
}

TEST(AsyncAcquireTest, ARequestCancelledAfterItsPromotionPassesThePermitOn) {
  ClientOptions co;
  co.worker_threads = 1;  // held up below, so the promoted request cannot take its grant
  Client client(test::redis_options(), co);
  SemaphoreOptions o = unique_options(1);
  o.lease = 60s;  // the request's permit must pass on at its cancel, not when its lease ends
  FairSemaphore sem(client, "promoted", o);
  Permit holder = sem.acquire();
  Outcome out;
  AcquireRequest request = sem.acquire_async(out.callback());
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  std::atomic<bool> behind_granted{false};
  std::thread behind([&] { behind_granted = sem.try_acquire_for(30s).has_value(); });
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 2; }));

  // The only worker thread blocks in another request's callback (callbacks must not block;
  // here that is the point).
  std::promise<void> unblock;
  std::shared_future<void> unblocked = unblock.get_future().share();
  FairSemaphore other(client, "blocker", unique_options(1));
  other.acquire_async([unblocked](std::exception_ptr, std::optional<Permit>) { unblocked.wait(); });
  const std::string request_id = sem.status().waiters.at(0).id;
  Connection admin(test::redis_options());
  // The inbox the request's wake-up goes to (its entry names its Client).
  const std::string inbox =
      o.key_prefix + ":{promoted}:wake:{inbox}" +
      admin.command({"HGET", o.key_prefix + ":{promoted}:info", "{inbox}" + request_id}).str;
  holder.release();  // promotes the request; the waker pops its wake-up, the worker is busy
  ASSERT_TRUE(wait_until([&] { return admin.command({"LLEN", inbox}).integer == 0; }));
  ASSERT_EQ(sem.status().holders.at(0).id, request_id);
  EXPECT_TRUE(request.cancel());
  unblock.set_value();
  ASSERT_EQ(out.done.get_future().wait_for(30s), std::future_status::ready);
  EXPECT_THROW(std::rethrow_exception(out.error), CancelledError);
  behind.join();
  EXPECT_TRUE(behind_granted) << "the cancelled request's permit did not pass on";
}

TEST(AsyncAcquireTest, EvictionEndsARequestWithEvictedError) {
  FairSemaphore sem(test::redis_options(), "evicted", unique_options(1));
  Permit holder = sem.acquire();
  std::future<Permit> f = sem.acquire_async();
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  EXPECT_EQ(sem.evict(sem.status().waiters.at(0).id), EvictResult::waiter);
  ASSERT_EQ(f.wait_for(30s), std::future_status::ready);
  EXPECT_THROW(f.get(), EvictedError);
  EXPECT_EQ(sem.metrics().evictions_seen, 1u);
}

TEST(AsyncAcquireTest, DestroyingTheSemaphoreCompletesPendingRequestsAndLeavesNothing) {
  FairSemaphore holding(test::redis_options(), "destroyed", unique_options(1));
  Permit holder = holding.acquire();
  std::future<Permit> f;
  {
    FairSemaphore sem(test::redis_options(), "destroyed", holding.options());
    f = sem.acquire_async();
    ASSERT_TRUE(wait_until([&] { return holding.status().waiters.size() == 1; }));
  }
  // The destructor returned after the request had left the queue and its callback had run, so
  // a callback never outlives what it refers to because its semaphore was destroyed first.
  ASSERT_EQ(f.wait_for(0s), std::future_status::ready) << "the destructor did not wait";
  EXPECT_TRUE(holding.status().waiters.empty());
  try {
    f.get();
    FAIL() << "granted after its FairSemaphore was destroyed";
  } catch (const CancelledError& e) {
    EXPECT_THAT(e.what(), HasSubstr("the FairSemaphore was destroyed"));
  }
  EXPECT_TRUE(holding.status().waiters.empty());
}

// The destructor waits for every callback even while the cancelled requests end under it: a
// cancelled request leaves the queue after its callback, on a borrowed connection, and a step
// that ended still holding that connection gave it back on whichever thread let go of the
// request last; the destructor's own list of the requests to cancel did so while the workers
// got through the first ones, its thread then counted itself as holding a connection, and it
// returned without waiting (seen as a callback that ran after its semaphore was gone).
TEST(AsyncAcquireTest, TheDestructorWaitsForEveryCallbackWhileTheCancelledRequestsLeave) {
  constexpr int kRequests = 1500;
  Client client(test::redis_options());
  // Twice: each round alone caught the fault in 4 runs of 5.
  for (int round = 0; round < 2; ++round) {
    const SemaphoreOptions o = unique_options(1);
    auto sem = std::make_unique<FairSemaphore>(client, "cancelled-leave", o);
    std::optional<Permit> held = sem->acquire();
    // Shared with the callbacks, so that one that outlived the destructor finds it still there.
    struct Seen {
      std::atomic<int> returned{0};
      std::atomic<int> cancelled{0};
    };
    auto seen = std::make_shared<Seen>();
    for (int i = 0; i < kRequests; ++i) {
      sem->acquire_async([seen](const std::exception_ptr& error, std::optional<Permit>) {
        if (error && message_of(error).find("was destroyed") != std::string::npos) {
          ++seen->cancelled;
        }
        ++seen->returned;
      });
    }
    ASSERT_TRUE(wait_until([&] { return sem->status().waiters.size() == kRequests; }));
    sem.reset();
    ASSERT_EQ(seen->returned.load(), kRequests) << "the destructor returned before the callbacks";
    EXPECT_EQ(seen->cancelled.load(), kRequests);
    // And each left the queue before the destructor returned.
    EXPECT_TRUE(FairSemaphore(client, "cancelled-leave", o).status().waiters.empty());
  }
}

// A callback that asks again while its semaphore is being destroyed is refused, so the
// destructor's wait for every callback of the handle ends.
TEST(AsyncAcquireTest, ACallbackAskingAgainWhileItsSemaphoreIsDestroyedIsRefused) {
  auto sem = std::make_unique<FairSemaphore>(test::redis_options(), "again", unique_options(1));
  FairSemaphore* const handle = sem.get();
  std::optional<Permit> held = sem->acquire();
  std::promise<void> granted;
  std::promise<void> destroying;
  std::exception_ptr asked_again;
  // Granted first; it asks again once the destructor has begun (the second request's
  // cancellation shows that), on the other worker thread.
  sem->acquire_async([&, began = destroying.get_future().share()](const std::exception_ptr&,
                                                                  std::optional<Permit>) {
    granted.set_value();
    began.wait();
    try {
      handle->acquire_async([](const std::exception_ptr&, std::optional<Permit>) {});
    } catch (...) {
      asked_again = std::current_exception();
    }
  });
  ASSERT_TRUE(wait_until([&] { return sem->status().waiters.size() == 1; }));
  sem->acquire_async([&](const std::exception_ptr& error, std::optional<Permit>) {
    EXPECT_TRUE(error);
    destroying.set_value();
  });
  ASSERT_TRUE(wait_until([&] { return sem->status().waiters.size() == 2; }));
  held.reset();
  granted.get_future().wait();
  auto destroyed = std::async(std::launch::async, [&] { sem.reset(); });
  ASSERT_EQ(destroyed.wait_for(30s), std::future_status::ready)
      << "the destructor still waits: the callback's new request was not refused";
  ASSERT_TRUE(asked_again);
  EXPECT_THROW(std::rethrow_exception(asked_again), CancelledError);
}

// on_lost runs during Permit::renew() holding a pool connection; a semaphore it destroys does
// not wait there for its cancelled requests, which need a connection of that pool (here the
// only one).
TEST(AsyncAcquireTest, ASemaphoreDestroyedInOnLostDoesNotWaitForTheConnectionItHolds) {
  ClientOptions co;
  co.max_connections = 1;
  Client client(test::redis_options(), co);
  std::unique_ptr<FairSemaphore> other;
  SemaphoreOptions o = unique_options(1);
  o.auto_renew = false;
  o.on_lost = [&](const std::string&, const std::string&) { other.reset(); };
  FairSemaphore sem(client, "lost", o);
  other = std::make_unique<FairSemaphore>(client, "other", unique_options(1));
  Permit other_held = other->acquire();
  Outcome out;
  other->acquire_async(out.callback());
  ASSERT_TRUE(wait_until([&] { return other->status().waiters.size() == 1; }));
  Permit permit = sem.acquire();
  ASSERT_EQ(sem.evict(permit.id()), EvictResult::holder);
  auto renewed = std::async(std::launch::async, [&] { return permit.renew(); });
  ASSERT_EQ(renewed.wait_for(30s), std::future_status::ready) << "deadlocked in on_lost";
  EXPECT_FALSE(renewed.get());
  EXPECT_FALSE(other);
  ASSERT_EQ(out.done.get_future().wait_for(30s), std::future_status::ready);
  EXPECT_THROW(std::rethrow_exception(out.error), CancelledError);
}

TEST(AsyncAcquireTest, BadCallsAreRefusedAndChangeNothing) {
  FairSemaphore sem(test::redis_options(), "bad", unique_options(1));
  EXPECT_THROW(sem.acquire_async(AcquireCallback()), InvalidArgument);
  EXPECT_TRUE(sem.status().waiters.empty());
  ClientOptions co;
  co.worker_threads = 0;
  EXPECT_THROW(Client(test::redis_options(), co), InvalidArgument);
  for (const auto idle : {std::chrono::milliseconds(0), std::chrono::milliseconds(-5),
                          std::chrono::milliseconds(std::chrono::hours(25))}) {
    ClientOptions bad_idle;
    bad_idle.idle_timeout = idle;
    try {
      Client refused(test::redis_options(), bad_idle);
      ADD_FAILURE() << "idle_timeout " << idle.count() << " ms was taken";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("idle_timeout"), std::string::npos) << e.what();
    }
  }
  AcquireRequest none;
  EXPECT_FALSE(none.cancel());
}

}  // namespace
}  // namespace fairsem
