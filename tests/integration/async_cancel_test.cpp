// AcquireRequest::cancel() under races: when it returns true the callback gets CancelledError,
// once, whatever came at the same instant (a grant, a deadline, an eviction); and every request
// still ends, so nothing waits forever. Randomized: the seed is printed, and FAIRSEM_TEST_SEED
// replays a run. And against a hung server, cancelling 100 pending requests or destroying a
// semaphore with 100 takes about one command timeout, not one per request.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "exception_is.hpp"
#include "fairsem/fairsem.hpp"
#include "redis_server.hpp"
#include "stopped.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::RedisServer;
using test::wait_until;

/// One asynchronous request and what its callback got.
struct Record {
  AcquireRequest handle;
  bool cancel_won = false;  // cancel() returned true (the test thread's alone)
  std::atomic<int> calls{0};
  std::mutex mu;
  std::exception_ptr error;  // under mu
  bool granted = false;      // under mu
};

/// Permits granted to the callbacks, released by the test thread at random.
struct Held {
  std::mutex mu;
  std::vector<Permit> permits;

  void keep(Permit p) {
    std::lock_guard<std::mutex> lock(mu);
    permits.push_back(std::move(p));
  }
  /// Releases one (the `pick`-th modulo their number), if any; true if one was.
  bool release_one(std::size_t pick) {
    std::optional<Permit> p;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (permits.empty()) return false;
      const std::size_t at = pick % permits.size();
      p = std::move(permits[at]);
      permits.erase(permits.begin() + static_cast<std::ptrdiff_t>(at));
    }
    return true;  // released as `p` goes, outside the lock
  }
};

unsigned seed_of_run() {
  if (const char* s = std::getenv("FAIRSEM_TEST_SEED")) {
    return static_cast<unsigned>(std::strtoul(s, nullptr, 10));
  }
  return std::random_device{}();
}

bool is_cancelled(const std::exception_ptr& error) {
  return test::exception_is<CancelledError>(error);
}

TEST(AsyncCancelTest, ACancelThatReturnedTrueEndsInCancelledErrorOnceWhateverRacesIt) {
  const unsigned seed = seed_of_run();
  std::mt19937 rng(seed);
  RecordProperty("seed", std::to_string(seed));
  std::printf("AsyncCancelTest seed %u (FAIRSEM_TEST_SEED replays it)\n", seed);

  constexpr int kHandles = 8;
  constexpr int kActions = 600;
  Client client(test::redis_options());
  SemaphoreOptions o;
  o.limit = 2;
  o.lease = 10s;
  o.key_prefix = test::unique_prefix();
  // One handle per owner, each with at most one request pending: a waiter's owner says whose
  // request an eviction hits.
  std::vector<std::unique_ptr<FairSemaphore>> handles;
  for (int i = 0; i < kHandles; ++i) {
    SemaphoreOptions mine = o;
    mine.owner_info = "h" + std::to_string(i);
    handles.push_back(std::make_unique<FairSemaphore>(client, "raced", mine));
  }
  auto held = std::make_shared<Held>();
  std::vector<std::shared_ptr<Record>> all;
  std::vector<std::shared_ptr<Record>> current(kHandles);

  const auto issue = [&](int i) {
    auto r = std::make_shared<Record>();
    auto done = [r, held](const std::exception_ptr& error, std::optional<Permit> permit) {
      {
        std::lock_guard<std::mutex> lock(r->mu);
        r->error = error;
        r->granted = permit.has_value();
      }
      if (permit) held->keep(std::move(*permit));
      ++r->calls;
    };
    // A third with no deadline, the rest with one of 1 to 30 ms: deadlines race the rest.
    if (rng() % 3 == 0) {
      r->handle = handles[i]->acquire_async(std::move(done));
    } else {
      const auto within = std::chrono::milliseconds(1 + rng() % 30);
      r->handle = handles[i]->acquire_async_until(std::chrono::steady_clock::now() + within,
                                                  std::move(done));
    }
    current[i] = r;
    all.push_back(r);
  };
  const auto evict = [&](int i) {
    const std::string owner = "h" + std::to_string(i);
    for (const PermitInfo& w : handles[0]->status().waiters) {
      if (w.owner == owner) (void)handles[0]->evict(w.id);
    }
  };
  const auto cancel = [&](int i) {
    if (current[i]->handle.cancel()) current[i]->cancel_won = true;
  };

  for (int i = 0; i < kHandles; ++i) issue(i);
  for (int step = 0; step < kActions; ++step) {
    const int i = static_cast<int>(rng() % kHandles);
    switch (rng() % 6) {
      case 0:
        cancel(i);
        break;
      case 1:  // the eviction's wake-up races the cancel
        evict(i);
        cancel(i);
        break;
      case 2:
        cancel(i);
        evict(i);
        break;
      case 3:  // the grant to the next in line races too
        held->release_one(rng());
        break;
      case 4:
        if (current[i]->calls.load() > 0) issue(i);
        break;
      default:
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
        break;
    }
  }
  // Every request ends: the ones left are granted as the permits are released, or time out.
  ASSERT_TRUE(wait_until([&] {
    while (held->release_one(0)) {
    }
    for (const auto& r : all) {
      if (r->calls.load() == 0) return false;
    }
    return true;
  })) << "a request never ended (seed "
      << seed << ")";

  int cancelled = 0;
  int granted = 0;
  for (const auto& r : all) {
    EXPECT_EQ(r->calls.load(), 1) << "seed " << seed;
    std::lock_guard<std::mutex> lock(r->mu);
    if (r->cancel_won) {
      ++cancelled;
      EXPECT_TRUE(is_cancelled(r->error)) << "cancel() returned true, yet the callback got "
                                          << (r->granted ? "a permit"
                                              : r->error ? "another error"
                                                         : "no permit and no error")
                                          << " (seed " << seed << ")";
      EXPECT_FALSE(r->granted) << "seed " << seed;
    }
    if (r->granted) ++granted;
  }
  std::printf("%zu requests: %d cancelled by cancel(), %d granted\n", all.size(), cancelled,
              granted);
  EXPECT_GT(cancelled, 0);
  EXPECT_GT(granted, 0);
  // Nothing is left behind: no waiter, no holder once the permits are released.
  ASSERT_TRUE(wait_until([&] {
    while (held->release_one(0)) {
    }
    const Status st = handles[0]->status();
    return st.waiters.empty() && st.holders.empty();
  })) << "seed "
      << seed;
}

// 100 requests cancelled, and a semaphore destroyed with 100 more, while the server hangs: each
// request leaves the queue after its callback, and each leave waited for its own command
// timeout, with its retries, one worker thread at a time: 100 leaves took minutes, and the
// callbacks after the first waited for them. Now a leave is bounded by one command timeout and,
// once one has failed so, the others go to the background at once (retried until their entries
// would expire). Then, with the server back, every entry is gone and the next waiter is served.
TEST(AsyncCancelTest, AHungServerCostsCancelledRequestsAndADestructorOneCommandTimeout) {
  constexpr int kEach = 100;
  constexpr auto kCommandTimeout = 1s;
  RedisServer server;
  ConnectionOptions c = server.options();
  c.command_timeout = kCommandTimeout;
  Client client(c);
  SemaphoreOptions o;
  o.limit = 1;
  o.lease = 3s;
  o.key_prefix = test::unique_prefix();
  FairSemaphore cancelled(client, "hung", o);
  auto destroyed = std::make_unique<FairSemaphore>(client, "hung", o);
  std::optional<Permit> holder = cancelled.acquire();

  struct Ends {
    std::atomic<int> cancelled{0};
    std::atomic<int> other{0};
  };
  auto ends = std::make_shared<Ends>();
  const auto callback = [ends](const std::exception_ptr& error, std::optional<Permit>) {
    if (is_cancelled(error)) {
      ++ends->cancelled;
    } else {
      ++ends->other;
    }
  };
  std::vector<AcquireRequest> requests;
  for (int i = 0; i < kEach; ++i) {
    requests.push_back(cancelled.acquire_async(callback));
    destroyed->acquire_async(callback);
  }
  ASSERT_TRUE(wait_until([&] { return cancelled.status().waiters.size() == 2 * kEach; }));

  test::Stopped hung(server.pid());
  const auto start = Clock::now();
  for (AcquireRequest& r : requests) ASSERT_TRUE(r.cancel());
  // Bounds that only turn a hang into a failure: ten command timeouts, where each cancelled
  // request's own leave took one or more before.
  ASSERT_TRUE(wait_until([&] { return ends->cancelled.load() == kEach; }, 10 * kCommandTimeout))
      << ends->cancelled.load() << " of " << kEach << " cancelled after 10 s";
  const auto cancelled_after = Clock::now() - start;
  auto destroying = std::async(std::launch::async, [&] { destroyed.reset(); });
  ASSERT_EQ(destroying.wait_for(10 * kCommandTimeout), std::future_status::ready)
      << "destroying the semaphore waited for each of its requests' leaves";
  const auto destroyed_after = Clock::now() - start;
  EXPECT_EQ(ends->cancelled.load(), 2 * kEach);
  EXPECT_EQ(ends->other.load(), 0);
  std::printf(
      "hung server: %d requests cancelled in %lld ms; %d more ended by the destructor "
      "%lld ms after the start\n",
      kEach,
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(cancelled_after).count()),
      kEach,
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(destroyed_after).count()));

  // The server is back: the next waiter is served, behind entries that left (the cancelled
  // requests', in the background) or expire with their lease (the destroyed semaphore's).
  hung.resume();
  holder.reset();
  const std::optional<Permit> next = cancelled.try_acquire_for(10s);
  ASSERT_TRUE(next.has_value()) << "the next waiter was not served";
  EXPECT_TRUE(cancelled.status().waiters.empty());
}

// A cancel ends the call under way at the end of the wait it is in (a reply, a connect): its
// retries and reconnects are not spent first. Against a hung server that asks for a password,
// each reconnect waits a command timeout for AUTH's reply; this call had 3 runs of 10 reconnect
// attempts ahead of it (about 25 s) when it was cancelled, and the callback (and a destructor
// waiting for it) waited for them all. Over TLS a reconnect's handshake waits the same way,
// with no password: that is how CI found it.
TEST(AsyncCancelTest, ACancelEndsTheCallUnderWayWithoutItsRetries) {
  constexpr auto kCommandTimeout = 1s;
  RedisServer server({"--requirepass", "cancel-pw"});
  ConnectionOptions c = server.options();
  c.password = "cancel-pw";
  c.command_timeout = kCommandTimeout;
  c.connect_timeout = kCommandTimeout;
  c.reconnect_attempts = 10;
  Client client(c);
  SemaphoreOptions o;
  o.limit = 1;
  o.lease = 3s;
  o.key_prefix = test::unique_prefix();
  struct Seen {
    std::atomic<bool> retrying{false};
    std::promise<std::exception_ptr> ended;
  };
  auto seen = std::make_shared<Seen>();
  o.logger = [seen](LogLevel, std::string_view message) {
    // run()'s word that the call's first run failed and that it runs it again.
    if (message.find("running it again") != std::string_view::npos) seen->retrying = true;
  };
  FairSemaphore sem(client, "cut", o);
  std::optional<Permit> holder = sem.acquire();

  test::Stopped hung(server.pid());
  AcquireRequest request =
      sem.acquire_async([seen](const std::exception_ptr& error, std::optional<Permit>) {
        seen->ended.set_value(error);
      });
  ASSERT_TRUE(wait_until([&] { return seen->retrying.load(); }, 10 * kCommandTimeout))
      << "the request's first call did not fail against the hung server";
  std::future<std::exception_ptr> ended = seen->ended.get_future();
  const auto cancelled_at = Clock::now();
  ASSERT_TRUE(request.cancel());
  // A bound that only tells the call's current wait (1 s) from its retries (about 25 s).
  ASSERT_EQ(ended.wait_for(5 * kCommandTimeout), std::future_status::ready)
      << "the callback waited for the cancelled call's retries";
  std::printf("cancelled during a call's retries: the callback came %lld ms later\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - cancelled_at)
                      .count()));
  EXPECT_TRUE(is_cancelled(ended.get()));

  // The server is back: the request's entry (if its call had queued it) leaves in the
  // background, and the next waiter is served once the holder is done.
  hung.resume();
  holder.reset();
  const std::optional<Permit> next = sem.try_acquire_for(10s);
  ASSERT_TRUE(next.has_value()) << "the next waiter was not served";
  EXPECT_TRUE(sem.status().waiters.empty());
}

}  // namespace
}  // namespace fairsem
