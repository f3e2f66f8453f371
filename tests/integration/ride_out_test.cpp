// Waiters ride out outages shorter than their deadline (issue 28, item 2), against real
// redis-servers: SIGKILLed and restarted on its AOF (entries kept: granted in ticket order),
// restarted without persistence (queued again), loading a data set for seconds (LOADING), and a
// deadline shorter than the outage (a timeout at the deadline, nothing promotable left).
// Blocking acquires and asynchronous requests, side by side.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/text.hpp"
#include "log_lines.hpp"
#include "queued_waiters.hpp"
#include "redis_server.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using detail::Connection;
using detail::Reply;
using test::QueuedWaiters;
using test::RedisServer;
using test::wait_until;

SemaphoreOptions options(std::chrono::milliseconds lease) {
  SemaphoreOptions o;
  o.limit = 1;
  o.lease = lease;
  o.key_prefix = test::unique_prefix();
  return o;
}

// The case: an AOF server, one holder, 10 threads in acquire() and 10 futures queued;
// the server SIGKILLed and restarted 3 s later. The lease (10 s) outlives the outage, so the
// holder keeps its permit and every waiter its entry: all 20 are granted once the holder
// releases, in ticket order, and nothing is left.
TEST(RideOutTest, WaitersRideOutAnAofRestartInTicketOrder) {
  RedisServer server({"--appendonly", "yes", "--appendfsync", "always"});
  Client client(server.options());
  SemaphoreOptions o = options(10s);
  FairSemaphore sem(client, "aof", o);
  std::optional<Permit> holder = sem.acquire();
  QueuedWaiters waiters(sem, holder, 10, 10);
  server.kill();
  std::this_thread::sleep_for(3s);  // the outage itself, not a synchronisation
  server.start();
  EXPECT_EQ(holder->release(), ReleaseResult::released) << "the holder lost its permit";
  ASSERT_TRUE(waiters.all_done(60s));
  waiters.join();
  waiters.expect_all_granted_in_order(true);
  EXPECT_TRUE(wait_until([&] { return test::queue_empty(sem); }, 20s));
  EXPECT_EQ(test::leftover_keys(Connection(server.options()), o.key_prefix + "*"),
            std::vector<std::string>{});
}

// Without persistence the queue itself is gone: each waiter queues again at its next poll (a
// new ticket), and all are granted, in the order of their new tickets. The holder's permit is
// gone too.
TEST(RideOutTest, WaitersQueueAgainAfterARestartWithoutPersistence) {
  RedisServer server;
  Client client(server.options());
  SemaphoreOptions o = options(10s);
  FairSemaphore sem(client, "no-persistence", o);
  std::optional<Permit> holder = sem.acquire();
  QueuedWaiters waiters(sem, holder, 10, 10);
  server.kill();
  std::this_thread::sleep_for(3s);  // the outage itself
  server.start();
  ASSERT_TRUE(waiters.all_done(60s));
  EXPECT_EQ(holder->release(), ReleaseResult::expired);
  waiters.join();
  waiters.expect_all_granted_in_order(false);
  EXPECT_TRUE(wait_until([&] { return test::queue_empty(sem); }, 20s));
  EXPECT_EQ(test::leftover_keys(Connection(server.options()), o.key_prefix + "*"),
            std::vector<std::string>{});
}

// A server loading its data set answers LOADING for seconds (longer than the in-place retries
// of one call, about 4 s): waiters keep their entries and are granted once it has loaded.
TEST(RideOutTest, WaitersRideOutALoadingServer) {
  // 3 ms per key on load, events processed every 1 KiB: about 2000 x 3 ms = 6 s of LOADING.
  RedisServer server(
      {"--key-load-delay", "3000", "--loading-process-events-interval-bytes", "1024"});
  Connection admin(server.options());
  const Reply populated = admin.command({"DEBUG", "POPULATE", "2000", "ride-out-filler"});
  if (populated.is_error()) GTEST_SKIP() << "DEBUG POPULATE refused: " << populated.str;
  Client client(server.options());
  SemaphoreOptions o = options(30s);
  FairSemaphore sem(client, "loading", o);
  std::optional<Permit> holder = sem.acquire();
  QueuedWaiters waiters(sem, holder, 5, 5);
  ASSERT_FALSE(admin.command({"SAVE"}).is_error());
  server.kill();
  server.start_loading();
  // It does answer LOADING (else this test would prove nothing), then loads for seconds.
  Connection probe(server.options());
  const auto loading = [&] {
    try {
      (void)probe.command({"GET", "x"});
      return false;
    } catch (const ReplyError& e) {
      return detail::starts_with(e.server_message(), "LOADING");
    }
  };
  const auto loading_from = Clock::now();
  ASSERT_TRUE(loading());
  ASSERT_TRUE(wait_until([&] { return !loading(); }, 60s));
  const auto loaded_after = Clock::now() - loading_from;
  EXPECT_GT(loaded_after, 4s) << "loaded too fast to outlast one call's own retries";
  EXPECT_EQ(holder->release(), ReleaseResult::released) << "the holder lost its permit";
  ASSERT_TRUE(waiters.all_done(60s));
  waiters.join();
  waiters.expect_all_granted_in_order(true);
  EXPECT_TRUE(wait_until([&] { return test::queue_empty(sem); }, 20s));
  EXPECT_EQ(test::leftover_keys(Connection(server.options()), o.key_prefix + "*"),
            std::vector<std::string>{});
}

// A deadline shorter than the outage: the acquire times out at its deadline (no error: the
// server being away is not the caller's failure), a cancel ends a request at once, and neither
// leaves an entry that could be promoted once the server is back: the leave handed to the
// background removes it long before it would expire (lease 30 s).
TEST(RideOutTest, ADeadlineShorterThanTheOutageTimesOutAndLeavesNothingPromotable) {
  RedisServer server({"--appendonly", "yes", "--appendfsync", "always"});
  Client client(server.options());
  SemaphoreOptions o = options(30s);
  test::LogLines log;  // what the leaves met, printed with their times if this fails
  o.logger = log.logger();
  FairSemaphore sem(client, "deadline", o);
  Permit holder = sem.acquire();
  std::promise<std::optional<Permit>> blocking;
  std::future<std::optional<Permit>> blocking_result = blocking.get_future();
  Clock::time_point blocking_started;
  std::thread thread([&] {
    blocking_started = Clock::now();
    try {
      blocking.set_value(sem.try_acquire_for(2s));
    } catch (...) {
      blocking.set_exception(std::current_exception());
    }
  });
  // Joined however the test ends (the acquire has a deadline).
  const std::unique_ptr<std::thread, void (*)(std::thread*)> joined(&thread, [](std::thread* t) {
    if (t->joinable()) t->join();
  });
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  std::future<std::optional<Permit>> timed = sem.try_acquire_for_async(2s);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 2; }));
  std::promise<std::exception_ptr> cancelled;
  AcquireRequest request = sem.acquire_async(
      [&](std::exception_ptr e, std::optional<Permit>) { cancelled.set_value(std::move(e)); });
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 3; }));
  // Which request each entry is, in queue order: named if one is left behind.
  std::map<std::string, std::string> who;
  const std::vector<std::string> names = {"the blocking acquire", "the timed request",
                                          "the cancelled request"};
  const std::vector<PermitInfo> queued = sem.status().waiters;
  for (std::size_t i = 0; i < names.size(); ++i) {
    who[queued.at(i).id] = names[i] + ", ticket " + std::to_string(queued.at(i).ticket);
  }

  const auto killed = Clock::now();
  server.kill();
  log.note("the server is killed");
  std::this_thread::sleep_for(500ms);  // into the outage
  const auto cancel_at = Clock::now();
  ASSERT_TRUE(request.cancel());
  std::future<std::exception_ptr> cancel_result = cancelled.get_future();
  ASSERT_EQ(cancel_result.wait_for(10s), std::future_status::ready);
  const auto cancel_took = Clock::now() - cancel_at;
  const std::exception_ptr why = cancel_result.get();
  ASSERT_TRUE(why);
  EXPECT_THROW(std::rethrow_exception(why), CancelledError) << test::what_of(why);
  // Ended without waiting for the server (at most a call already under way, which gives up
  // after the connection's own reconnects).
  EXPECT_LT(cancel_took, 4s);

  ASSERT_EQ(blocking_result.wait_for(15s), std::future_status::ready);
  const auto blocking_took = Clock::now() - blocking_started;
  std::optional<Permit> none;
  ASSERT_NO_THROW(none = blocking_result.get()) << "the acquire failed instead of timing out";
  EXPECT_FALSE(none);
  EXPECT_GE(blocking_took, 2s);
  // At its deadline, or when the call under way at the deadline gave up (its reconnects).
  EXPECT_LT(blocking_took, 6s);
  ASSERT_EQ(timed.wait_for(15s), std::future_status::ready);
  std::optional<Permit> none_async;
  ASSERT_NO_THROW(none_async = timed.get()) << "the async acquire failed instead of timing out";
  EXPECT_FALSE(none_async);

  // The outage outlasts every deadline.
  std::this_thread::sleep_until(std::max(Clock::now(), killed + 5s));
  server.start();
  log.note("the server is back");
  // The leaves handed to the background remove the entries well before they would expire on
  // their own (30 s after their last poll): nothing is left to promote.
  std::vector<PermitInfo> left_behind;
  const bool left = wait_until(
      [&] {
        left_behind = sem.status().waiters;
        return left_behind.empty();
      },
      10s);
  if (!left) {
    std::string names_left;
    // A ticket other than the one it had before the outage, or a short wait, would say the
    // entry was queued again after the restart.
    for (const PermitInfo& w : left_behind) {
      names_left += "\n  " + w.id + " (" + who[w.id] + " before the outage): ticket " +
                    std::to_string(w.ticket) + ", waited " +
                    (w.waited ? std::to_string(w.waited->count()) + " ms" : "?") + ", lease left " +
                    std::to_string(w.lease_left.count()) + " ms";
    }
    ADD_FAILURE() << "10 s after the server is back, still queued:" << names_left << "\nlogged:\n"
                  << log.timed();
    ASSERT_TRUE(wait_until([&] { return sem.status().waiters.empty(); }, 30s));
  }
  EXPECT_EQ(holder.release(), ReleaseResult::released);
  EXPECT_TRUE(test::queue_empty(sem));
  EXPECT_EQ(test::leftover_keys(Connection(server.options()), o.key_prefix + "*"),
            std::vector<std::string>{});
}

}  // namespace
}  // namespace fairsem
