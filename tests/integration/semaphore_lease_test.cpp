// SemaphoreTest, leases: batched and manual renewal, permits lost behind the holder's back or
// reaped at their deadline, stale holders of a reused id, and what survives on the server side
// (SCRIPT FLUSH, a lost counter, a restart with AOF) or a fork.

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "redis_server.hpp"
#include "semaphore_fixture.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using test::redis_options;
using test::SemaphoreTest;
using test::wait_until;

// Behaviour 5: a permit held for 5x its lease stays held, with one renew call per interval
// for all the permits of the process.
TEST_F(SemaphoreTest, HolderKeepsItsPermitThroughBatchedRenewals) {
  // Generous: the watchdog may be starved for up to 2/3 of a lease on a loaded machine.
  const auto lease = 1200ms;
  SemaphoreOptions o = options(3, lease);
  FairSemaphore sem(redis_options(), "renew", o);
  FairSemaphore outsider(redis_options(), "renew", options(3, lease));
  std::vector<Permit> permits;
  for (int i = 0; i < 3; ++i) permits.push_back(sem.acquire());
  admin_.command({"CONFIG", "RESETSTAT"});
  const auto start = std::chrono::steady_clock::now();
  const auto until = start + 5 * lease;
  long long outsider_tries = 0;
  while (std::chrono::steady_clock::now() < until) {
    ++outsider_tries;
    ASSERT_FALSE(outsider.try_acquire()) << "a permit expired while its holder renewed it";
    std::this_thread::sleep_for(lease / 4);  // the workload: holding for 5 leases
  }
  const long long renewals = script_calls() - outsider_tries;
  const auto elapsed = std::chrono::steady_clock::now() - start;
  for (const Permit& p : permits) EXPECT_FALSE(p.lost());
  const long long intervals = elapsed / o.effective_renew_interval();
  // At most one renew call per interval for all three permits (separate renewals would make
  // three), and at least one, or the permits could not have outlived their lease.
  EXPECT_LE(renewals, intervals + 1);
  EXPECT_GE(renewals, 1);
  EXPECT_EQ(3u, sem.status().holders.size());
}

// Behaviour 5: renewals above the chunk size still reach every permit.
TEST_F(SemaphoreTest, ThousandsOfPermitsAllStayRenewed) {
  constexpr int kPermits = 2100;  // more than one renew chunk
  const auto lease = 3000ms;
  FairSemaphore sem(redis_options(), "many", options(kPermits, lease));
  std::vector<Permit> permits;
  permits.reserve(kPermits);
  for (int i = 0; i < kPermits; ++i) permits.push_back(std::move(*sem.try_acquire()));
  // Hold for two leases: without renewals every permit would be gone.
  const auto until = std::chrono::steady_clock::now() + 2 * lease;
  while (std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(50ms);
  int lost = 0;
  for (const Permit& p : permits) lost += p.lost() ? 1 : 0;
  EXPECT_EQ(0, lost);
  EXPECT_EQ(std::size_t(kPermits), sem.status().holders.size());
}

// Behaviour 5: a permit removed behind the holder's back is reported lost; its release says so.
TEST_F(SemaphoreTest, PermitDeletedBehindItsBackIsReportedLost) {
  std::mutex mu;
  std::vector<std::string> lost_ids;
  std::vector<std::string> reasons;
  SemaphoreOptions o = options(1, 600ms);
  o.on_lost = [&](const std::string& id, const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu);
    lost_ids.push_back(id);
    reasons.push_back(reason);
  };
  FairSemaphore sem(redis_options(), "deleted", o);
  Permit p = sem.acquire();
  admin_.command({"DEL", key("deleted", "owner"), key("deleted", "time")});
  ASSERT_TRUE(wait_until([&] { return p.lost(); }));
  // lost() turns true just before on_lost is called, on the watchdog's thread.
  ASSERT_TRUE(wait_until([&] {
    std::lock_guard<std::mutex> lock(mu);
    return !lost_ids.empty();
  }));
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(1u, lost_ids.size());
    EXPECT_EQ(p.id(), lost_ids[0]);
    EXPECT_NE(std::string::npos, reasons[0].find("no longer in Redis"));
  }
  EXPECT_EQ(ReleaseResult::expired, p.release());
}

TEST_F(SemaphoreTest, ManualRenewWithoutWatchdog) {
  SemaphoreOptions o = options(1, 1000ms);
  o.auto_renew = false;
  FairSemaphore sem(redis_options(), "manual", o);
  Permit p = sem.acquire();
  EXPECT_TRUE(p.renew());
  // Without renewals the permit expires after its lease and passes on.
  FairSemaphore other(redis_options(), "manual", options(1, 1000ms));
  auto q = other.try_acquire_for(10s);
  ASSERT_TRUE(q);
  EXPECT_FALSE(p.renew());
  EXPECT_TRUE(p.lost());
  EXPECT_EQ(ReleaseResult::expired, p.release());
  EXPECT_TRUE(q->held());
}

// Behaviour 8: SCRIPT FLUSH (and FUNCTION FLUSH, where the server has functions) between calls
// changes nothing for the caller.
TEST_F(SemaphoreTest, ScriptFlushIsInvisible) {
  FairSemaphore sem(redis_options(), "noscript", options(1));
  const bool functions = has_functions();
  const auto flush = [&] {
    admin_.command({"SCRIPT", "FLUSH"});
    if (functions) admin_.command({"FUNCTION", "FLUSH"});
  };
  flush();
  Permit p = sem.acquire();
  flush();
  EXPECT_EQ(1u, sem.status().holders.size());
  flush();
  EXPECT_EQ(ReleaseResult::released, p.release());
  flush();
  EXPECT_TRUE(sem.try_acquire());
}

// A permit is its id and its ticket: a holder whose lease ran out cannot release or renew a
// later permit that reuses its caller-chosen id.
TEST_F(SemaphoreTest, StaleHolderCannotTouchALaterPermitWithTheSameId) {
  SemaphoreOptions o = options(1, 500ms);
  o.permit_id = "job-9";
  o.auto_renew = false;
  FairSemaphore first(redis_options(), "reused-id", o);
  Permit stale = first.acquire();
  ASSERT_TRUE(wait_until([&] { return first.status().holders.empty(); }));  // expired, reaped
  EXPECT_TRUE(stale.lost());  // its deadline passed without a renewal
  FairSemaphore second(redis_options(), "reused-id", o);
  Permit current = second.acquire();
  EXPECT_GT(current.fencing_token(), stale.fencing_token());
  EXPECT_FALSE(stale.renew());
  EXPECT_EQ(ReleaseResult::expired, stale.release());
  const Status s = second.status();
  ASSERT_EQ(1u, s.holders.size());
  EXPECT_EQ(current.fencing_token(), s.holders[0].ticket);
  EXPECT_TRUE(current.renew());
}

// The client's deadline is never later than the moment Redis reaps the permit: Redis reads
// its clock in whole milliseconds, so it must only reap a lease strictly past its deadline.
// Polling status() back to back hits the first reaping call to within a round trip.
TEST_F(SemaphoreTest, RedisNeverReapsAPermitBeforeTheClientDeadline) {
  SemaphoreOptions o = options(1, 20ms);
  o.auto_renew = false;
  FairSemaphore sem(redis_options(), "reap-boundary", o);
  for (int round = 0; round < 25; ++round) {
    Permit p = sem.acquire();
    while (!sem.status().holders.empty()) {
    }
    ASSERT_TRUE(p.lost()) << "round " << round << ": reaped "
                          << std::chrono::duration_cast<std::chrono::microseconds>(
                                 p.deadline() - std::chrono::steady_clock::now())
                                 .count()
                          << " us before the client's deadline";
    EXPECT_EQ(ReleaseResult::expired, p.release());
  }
}

// Tickets only grow: if the counter key is lost, new tickets continue after the newest one
// still queued instead of sorting ahead of the holders.
TEST_F(SemaphoreTest, LostCounterNeverLetsANewcomerAheadOfHolders) {
  FairSemaphore sem(redis_options(), "lost-counter", options(2));
  for (int i = 0; i < 2; ++i) sem.acquire().release();
  Permit holder = sem.acquire();
  admin_.command({"DEL", key("lost-counter", "counter")});
  Permit next = sem.acquire();
  EXPECT_GT(next.fencing_token(), holder.fencing_token());
  EXPECT_EQ(std::to_string(next.fencing_token()),
            admin_.command({"GET", key("lost-counter", "counter")}).str);
  EXPECT_FALSE(sem.try_acquire());
}

// Permit ids come from the kernel: a forked child never draws the id its parent draws next.
TEST_F(SemaphoreTest, ForkedProcessesNeverShareAPermitId) {
  SemaphoreOptions o = options(2);
  o.auto_renew = false;  // no watchdog thread: the fork happens in a single-threaded process
  FairSemaphore sem(redis_options(), "forked", o);
  auto first = sem.try_acquire();  // the parent has drawn an id before forking
  ASSERT_TRUE(first);
  first->release();
  int fds[2];
  ASSERT_EQ(0, ::pipe(fds));
  const pid_t child = ::fork();
  ASSERT_NE(-1, child);
  if (child == 0) {
    ::close(fds[0]);
    long long token = -1;
    try {
      FairSemaphore own(redis_options(), "forked", o);
      auto p = own.try_acquire();
      token = p ? p->fencing_token() : 0;
      if (p) p->release();
    } catch (...) {
    }
    const std::string line = std::to_string(token);
    if (::write(fds[1], line.data(), line.size()) < 0) ::_exit(2);
    ::_exit(0);
  }
  ::close(fds[1]);
  auto mine = sem.try_acquire();
  char buf[32] = {};
  const ssize_t n = ::read(fds[0], buf, sizeof(buf) - 1);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_GT(n, 0);
  const long long child_token = std::stoll(std::string(buf, static_cast<std::size_t>(n)));
  ASSERT_TRUE(mine);
  EXPECT_GT(child_token, 0);
  EXPECT_NE(mine->fencing_token(), child_token) << "parent and child were granted one permit";
}

// A Redis restart with AOF: the permit survives, its release works afterwards, and tickets
// keep growing.
TEST_F(SemaphoreTest, PermitsSurviveARedisRestartWithAof) {
  test::RedisServer server({"--appendonly", "yes", "--appendfsync", "always"});
  ConnectionOptions conn = redis_options();
  conn.port = server.port();
  SemaphoreOptions o = options(1, 60s);
  o.logger = [](LogLevel, std::string_view) {};  // reconnect warnings are expected here
  FairSemaphore sem(conn, "restart", o);
  FairSemaphore outsider(conn, "restart", o);
  Permit p = sem.acquire();
  server.restart();
  EXPECT_FALSE(outsider.try_acquire()) << "the permit did not survive the restart";
  EXPECT_EQ(ReleaseResult::released, p.release());
  auto next = outsider.try_acquire();
  ASSERT_TRUE(next);
  EXPECT_GT(next->fencing_token(), p.fencing_token());
}

}  // namespace
}  // namespace fairsem
