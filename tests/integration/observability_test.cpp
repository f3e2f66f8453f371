// Observability: FairSemaphore::metrics() (each counter moves exactly when its event happens,
// the wait histogram), on_renew_failure (a warning before on_lost), and the logger hook (off
// unless set).

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "log_lines.hpp"
#include "redis_server.hpp"
#include "semaphore_fixture.hpp"
#include "stopped.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using detail::Connection;
using test::LogLines;
using test::redis_options;
using test::wait_until;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Seconds = std::chrono::duration<double>;

/// Every counter of `m`, so that a comparison shows the ones that moved and the ones that did
/// not.
std::string counters(const Metrics& m) {
  return fmt::format(
      "acquire_attempts={} grants={} rejections={} timeouts={} evictions_seen={} errors={} "
      "renewals={} renewal_failures={} permits_lost={} releases={} reconnects={}",
      m.acquire_attempts, m.grants, m.rejections, m.timeouts, m.evictions_seen, m.errors,
      m.renewals, m.renewal_failures, m.permits_lost, m.releases, m.reconnects);
}

/// The options of a private server (`server`), otherwise as the test environment's.
ConnectionOptions options_for(const test::RedisServer& server) {
  ConnectionOptions c = redis_options();
  c.unix_path.clear();
  c.host = "127.0.0.1";
  c.port = server.port();
  return c;
}

class ObservabilityTest : public test::SemaphoreFixture {
 protected:
  /// Removes every holder of `name` behind its back, as an operator's DEL would.
  void delete_holders(const std::string& name) {
    admin_.command({"DEL", key(name, "owner"), key(name, "time")});
  }
};

// --- counters --------------------------------------------------------------------------------

TEST_F(ObservabilityTest, CountsAttemptsGrantsRejectionsAndReleases) {
  FairSemaphore sem(redis_options(), "counts", options(1));
  EXPECT_EQ(
      "acquire_attempts=0 grants=0 rejections=0 timeouts=0 evictions_seen=0 errors=0 renewals=0 "
      "renewal_failures=0 permits_lost=0 releases=0 reconnects=0",
      counters(sem.metrics()));
  std::optional<Permit> p = sem.try_acquire();
  ASSERT_TRUE(p);
  EXPECT_FALSE(sem.try_acquire());
  // No time to wait: a rejection, like try_acquire's, not a timeout.
  EXPECT_FALSE(sem.try_acquire_for(0ms));
  EXPECT_FALSE(sem.try_acquire_until(std::chrono::system_clock::now() - 1s));
  SemaphoreLock lock(sem);
  EXPECT_FALSE(lock.try_lock());
  EXPECT_EQ(ReleaseResult::released, p->release());
  EXPECT_EQ(ReleaseResult::already_released, p->release());  // nothing freed, not counted
  EXPECT_EQ(
      "acquire_attempts=5 grants=1 rejections=4 timeouts=0 evictions_seen=0 errors=0 renewals=0 "
      "renewal_failures=0 permits_lost=0 releases=1 reconnects=0",
      counters(sem.metrics()));
  {
    Permit q = sem.acquire();
    std::unique_lock<SemaphoreLock> blocked(lock, std::defer_lock);
    EXPECT_FALSE(blocked.try_lock());
  }  // the destructor releases
  const Metrics m = sem.metrics();
  EXPECT_EQ(
      "acquire_attempts=7 grants=2 rejections=5 timeouts=0 evictions_seen=0 errors=0 renewals=0 "
      "renewal_failures=0 permits_lost=0 releases=2 reconnects=0",
      counters(m));
  EXPECT_EQ(2u, m.acquire_wait.count);
}

TEST_F(ObservabilityTest, CountsTimeoutsEvictionsAndErrors) {
  FairSemaphore holder(redis_options(), "outcomes", options(1, 90s));
  Permit held = holder.acquire();
  // A 90 s lease: a waiter polls every 30 s, so only the eviction's wake-up ends it sooner.
  FairSemaphore sem(redis_options(), "outcomes", options(1, 90s));
  EXPECT_FALSE(sem.try_acquire_for(50ms));
  SemaphoreLock lock(sem);
  EXPECT_FALSE(lock.try_lock_until(std::chrono::steady_clock::now() + 50ms));
  EXPECT_EQ(
      "acquire_attempts=2 grants=0 rejections=0 timeouts=2 evictions_seen=0 errors=0 renewals=0 "
      "renewal_failures=0 permits_lost=0 releases=0 reconnects=0",
      counters(sem.metrics()));

  auto waiter = std::async(std::launch::async, [&] { return sem.acquire(); });
  ASSERT_TRUE(wait_until([&] { return holder.status().waiters.size() == 1; }));
  EXPECT_EQ(EvictResult::waiter, holder.evict(holder.status().waiters.at(0).id));
  EXPECT_THROW(waiter.get(), EvictedError);

  // A stored limit that is not a number: every acquire is refused.
  admin_.command({"HSET", key("outcomes", "meta"), "limit", "seven"});
  EXPECT_THROW((void)sem.try_acquire(), ReplyError);
  EXPECT_THROW((void)sem.try_acquire_for(1s), ReplyError);
  EXPECT_EQ(
      "acquire_attempts=5 grants=0 rejections=0 timeouts=2 evictions_seen=1 errors=2 renewals=0 "
      "renewal_failures=0 permits_lost=0 releases=0 reconnects=0",
      counters(sem.metrics()));
  EXPECT_EQ(0u, sem.metrics().acquire_wait.count);
  admin_.command({"HSET", key("outcomes", "meta"), "limit", "1"});
}

TEST_F(ObservabilityTest, CountsRenewalsPerPermitAndLostPermitsOnce) {
  SemaphoreOptions o = options(3);
  o.auto_renew = false;
  FairSemaphore sem(redis_options(), "renewals", o);
  Permit a = sem.acquire();
  Permit b = sem.acquire();
  EXPECT_EQ(2u, sem.renew_all());
  EXPECT_EQ(2u, sem.metrics().renewals);
  EXPECT_TRUE(a.renew());
  EXPECT_EQ(3u, sem.metrics().renewals);

  delete_holders("renewals");
  EXPECT_EQ(0u, sem.renew_all());  // both found gone: lost
  EXPECT_EQ(0u, sem.renew_all());  // nothing left to renew
  EXPECT_FALSE(a.renew());
  EXPECT_EQ(ReleaseResult::expired, b.release());  // lost already: not counted again
  EXPECT_EQ(
      "acquire_attempts=2 grants=2 rejections=0 timeouts=0 evictions_seen=0 errors=0 renewals=3 "
      "renewal_failures=0 permits_lost=2 releases=0 reconnects=0",
      counters(sem.metrics()));

  // A permit that nobody renewed is found lost by its release.
  Permit c = sem.acquire();
  delete_holders("renewals");
  EXPECT_EQ(ReleaseResult::expired, c.release());
  EXPECT_EQ(3u, sem.metrics().permits_lost);
  EXPECT_EQ(0u, sem.metrics().releases);
}

// Connections killed by the server are connected again: the pool's at its next command, the
// watchdog's at its next renewal; a watchdog connection that could not be saved is replaced.
TEST_F(ObservabilityTest, CountsReconnectsOfThePoolAndTheWatchdog) {
  test::RedisServer server;  // its own: every client connection on it is the semaphore's
  ConnectionOptions c = options_for(server);
  c.reconnect_attempts = 2;  // a renewal fails quickly while the server is down
  c.reconnect_backoff_min = 1ms;
  c.reconnect_backoff_max = 5ms;
  FairSemaphore sem(c, "reconnects", options(1, 600ms));  // renewed every 200 ms
  Permit p = sem.acquire();
  ASSERT_TRUE(wait_until([&] { return sem.metrics().renewals >= 1; }));  // the watchdog is on
  const auto renewals = sem.metrics().renewals;
  {
    Connection admin(c);
    EXPECT_EQ(2, admin.command({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"}).integer);
  }
  ASSERT_TRUE(wait_until([&] { return sem.metrics().reconnects == 1; }));
  ASSERT_TRUE(wait_until([&] { return sem.metrics().renewals > renewals; }));
  EXPECT_EQ(1u, sem.status().holders.size());  // on the pool's connection
  EXPECT_EQ(2u, sem.metrics().reconnects);
  EXPECT_FALSE(p.lost());
  EXPECT_EQ(0u, sem.metrics().renewal_failures);  // a re-run after the reconnect renewed it

  // A renewal whose every retry failed leaves the watchdog's connection broken; the next round
  // starts on a new one.
  server.kill();
  ASSERT_TRUE(wait_until([&] { return sem.metrics().renewal_failures >= 1; }));
  EXPECT_EQ(2u, sem.metrics().reconnects);
  server.start();
  ASSERT_TRUE(wait_until([&] { return sem.metrics().reconnects == 3; }));
}

// --- the wait histogram ----------------------------------------------------------------------

TEST_F(ObservabilityTest, HistogramHoldsEachGrantsWaitInCumulativeBuckets) {
  FairSemaphore sem(redis_options(), "histogram", options(1));
  using Clock = std::chrono::steady_clock;
  const auto holder_asked = Clock::now();
  std::optional<Permit> holder = sem.acquire();
  const Clock::duration holder_waited = Clock::now() - holder_asked;  // at least its measure
  Clock::time_point asked;
  Clock::duration waited{};
  std::thread waiter([&] {
    asked = Clock::now();
    Permit p = sem.acquire();
    waited = Clock::now() - asked;
  });
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  const auto released = Clock::now() + 300ms;
  std::this_thread::sleep_until(released);  // the holder's work, which the waiter waits out
  holder.reset();
  waiter.join();
  const double least = Seconds(released - asked).count();  // the waiter waited at least this
  const double most = Seconds(std::max(waited, holder_waited)).count();  // nobody longer

  const Histogram h = sem.metrics().acquire_wait;
  EXPECT_THAT(h.bounds_seconds, ElementsAre(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60,
                                            std::numeric_limits<double>::infinity()));
  ASSERT_EQ(h.bounds_seconds.size(), h.counts.size());
  EXPECT_EQ(2u, h.count);
  EXPECT_EQ(h.count, h.counts.back());
  for (std::size_t i = 0; i < h.counts.size(); ++i) {
    const double bound = h.bounds_seconds[i];
    if (i > 0) {
      EXPECT_LE(h.counts[i - 1], h.counts[i]) << "cumulative, at le=" << bound;
    }
    // At most the holder waited less than the waiter's least; both waited at most `most`.
    if (bound < least) {
      EXPECT_LE(h.counts[i], 1u) << "le=" << bound << " least=" << least;
    }
    if (bound >= most) {
      EXPECT_EQ(h.counts[i], 2u) << "le=" << bound << " most=" << most;
    }
  }
  EXPECT_GE(h.sum_seconds, least);
  EXPECT_LE(h.sum_seconds, Seconds(waited + holder_waited).count());
}

// --- on_renew_failure -----------------------------------------------------------------------

// What the callbacks saw, in order (any thread).
struct Event {
  bool lost = false;  // false: on_renew_failure
  PermitInfo permit;  // on_renew_failure's; only the id for on_lost
  std::string text;   // the error, or the reason it was lost
};

class Events {
 public:
  void add(Event e) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(e));
  }
  std::vector<Event> all() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Event> events_;
};

// Renewals of a hung server fail: on_renew_failure reports each with the lease still left,
// until the lease runs out and on_lost reports the loss; the logger hears of every failure.
TEST_F(ObservabilityTest, RenewFailuresAreReportedWithTheLeaseLeftBeforeThePermitIsLost) {
  test::RedisServer server;
  ConnectionOptions c = options_for(server);
  c.connect_timeout = 50ms;
  c.command_timeout = 50ms;
  c.reconnect_attempts = 1;
  SemaphoreOptions o = options(1, 600ms);
  o.renew_interval = 100ms;  // a failed renewal takes about 150 ms: 3 tries of 50 ms
  o.owner_info = "observed-worker";
  Events events;
  o.on_renew_failure = [&](const PermitInfo& permit, const std::string& error) {
    events.add({false, permit, error});
  };
  o.on_lost = [&](const std::string& id, const std::string& reason) {
    PermitInfo permit;
    permit.id = id;
    events.add({true, permit, reason});
  };
  LogLines lines;
  o.logger = lines.logger();
  FairSemaphore sem(c, "renew-failure", o);
  std::optional<Permit> p = sem.acquire();
  {
    const test::Stopped hung(server.pid());
    ASSERT_TRUE(wait_until([&] { return p->lost(); }));
    ASSERT_TRUE(wait_until([&] { return !events.all().empty() && events.all().back().lost; }));
  }
  const std::vector<Event> seen = events.all();
  ASSERT_GE(seen.size(), 2u);
  std::chrono::milliseconds before = 600ms;
  for (std::size_t i = 0; i + 1 < seen.size(); ++i) {
    const Event& e = seen[i];
    ASSERT_FALSE(e.lost) << "on_lost came before failure " << i;
    EXPECT_EQ(p->id(), e.permit.id);
    EXPECT_EQ(p->fencing_token(), e.permit.ticket);
    EXPECT_EQ(p->slot(), e.permit.slot);
    EXPECT_EQ("observed-worker", e.permit.owner);
    // Counted down to the same deadline: no failed renewal extended it.
    EXPECT_GT(e.permit.lease_left.count(), 0) << i;
    EXPECT_LT(e.permit.lease_left.count(), before.count()) << i;
    before = e.permit.lease_left;
    EXPECT_THAT(e.text, HasSubstr(std::to_string(server.port()))) << i;
  }
  EXPECT_TRUE(seen.back().lost);
  EXPECT_EQ(p->id(), seen.back().permit.id);
  EXPECT_THAT(seen.back().text, HasSubstr("lease ran out"));

  const Metrics m = sem.metrics();
  EXPECT_GE(m.renewal_failures, seen.size() - 1);  // the last one may have found no lease left
  EXPECT_EQ(1u, m.permits_lost);
  const std::vector<std::string> logged = lines.lines();
  const auto failures_logged = std::count_if(logged.begin(), logged.end(), [](const auto& line) {
    return line.find("renewing 1 permits failed") != std::string::npos;
  });
  EXPECT_EQ(static_cast<long>(m.renewal_failures), failures_logged);
}

// A callback that throws is logged, and changes nothing else.
TEST_F(ObservabilityTest, RenewFailureCallbackThatThrowsIsLogged) {
  SemaphoreOptions o = options(1);
  o.auto_renew = false;
  o.on_renew_failure = [](const PermitInfo&, const std::string&) {
    throw std::runtime_error("callback trouble");
  };
  LogLines lines;
  o.logger = lines.logger();
  FairSemaphore sem(redis_options(), "renew-failure-throws", o);
  Permit p = sem.acquire();
  // A key of the wrong type makes the renew script fail.
  delete_holders("renew-failure-throws");
  admin_.command({"SET", key("renew-failure-throws", "owner"), "not a zset"});
  EXPECT_THROW((void)p.renew(), ReplyError);
  EXPECT_THROW((void)sem.renew_all(), ReplyError);
  ASSERT_EQ(2u, lines.lines().size());
  for (const std::string& line : lines.lines()) {
    EXPECT_THAT(line, HasSubstr("on_renew_failure threw: callback trouble"));
  }
  EXPECT_EQ(2u, sem.metrics().renewal_failures);
  EXPECT_FALSE(p.lost());
  admin_.command({"DEL", key("renew-failure-throws", "owner")});
}

// --- the logger ------------------------------------------------------------------------------

// A permit lost without an on_lost callback is a warning for the logger; without a logger
// nothing at all is written (a library must not write to its host's stderr uninvited).
TEST_F(ObservabilityTest, LoggerIsOffUnlessSet) {
  SemaphoreOptions quiet = options(2);
  quiet.auto_renew = false;
  SemaphoreOptions logged = quiet;
  LogLines lines;
  logged.logger = lines.logger();
  FairSemaphore with_logger(redis_options(), "logger-off", logged);
  FairSemaphore without_logger(redis_options(), "logger-off", quiet);
  Permit seen = with_logger.acquire();
  Permit unseen = without_logger.acquire();
  delete_holders("logger-off");

  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(unseen.renew());
  EXPECT_EQ(ReleaseResult::expired, unseen.release());
  const std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ("", printed);

  // The same event with a logger: the warning exists, and goes there.
  EXPECT_FALSE(seen.renew());
  ASSERT_EQ(1u, lines.lines().size());
  EXPECT_THAT(lines.lines()[0], HasSubstr("permit " + seen.id() + " was lost"));
  EXPECT_THAT(lines.lines()[0], HasSubstr("'logger-off'"));
}

}  // namespace
}  // namespace fairsem
