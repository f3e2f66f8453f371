// HungServerTest: what a holder hears and waits for while its server hangs (SIGSTOP: the kernel
// still accepts connections, nothing answers). A renewal that is not answered is reported
// through on_renew_failure before on_lost; releasing a permit known lost sends nothing and
// returns at once; a release that cannot reach the server is retried once, as documented.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "log_lines.hpp"
#include "redis_server.hpp"
#include "semaphore_fixture.hpp"
#include "stopped.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using test::LogLines;
using test::wait_until;

/// What the callbacks heard, in order: "failure" or "lost".
class Heard {
 public:
  void add(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    heard_.push_back(what);
  }
  std::vector<std::string> all() const {
    std::lock_guard<std::mutex> lock(mu_);
    return heard_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> heard_;
};

class HungServerTest : public test::SemaphoreFixture {
 protected:
  /// The options of `server_`, with the harness's timeouts.
  ConnectionOptions connection() const {
    ConnectionOptions c = test::redis_options();
    c.unix_path.clear();
    c.host = "127.0.0.1";
    c.port = server_.port();
    return c;
  }
  /// Options whose callbacks tell `heard`.
  SemaphoreOptions told(std::chrono::milliseconds lease, Heard& heard) {
    SemaphoreOptions o = options(1, lease);
    o.on_renew_failure = [&heard](const PermitInfo&, const std::string&) { heard.add("failure"); };
    o.on_lost = [&heard](const std::string&, const std::string&) { heard.add("lost"); };
    return o;
  }

  test::RedisServer server_;  // its own: stopped by the tests
};

// A renewal call waits up to its leases' end for a server that hangs: before, that one call was
// all the watchdog made, and on_lost the first and only signal. Now each quarter of the renew
// interval without a reply is a failed renewal, reported while the lease still runs.
TEST_F(HungServerTest, ARenewalThatIsNotAnsweredIsReportedBeforeThePermitIsLost) {
  Heard heard;
  LogLines lines;
  SemaphoreOptions o = told(3s, heard);  // renewed every second
  o.logger = lines.logger();
  FairSemaphore sem(connection(), "hung-renewal", o);
  Permit permit = sem.acquire();
  // The renewals' connection is up (the first renewal was answered): what hangs is a call on
  // it. (A connect, a TLS handshake say, to a hung server is reported when it fails, not while
  // it lasts.)
  const auto first = permit.deadline();
  ASSERT_TRUE(wait_until([&] { return permit.deadline() > first; }, 20s));
  {
    const test::Stopped hung(server_.pid());
    ASSERT_TRUE(wait_until([&] { return permit.lost(); }, 20s));
    ASSERT_TRUE(wait_until([&] { return !heard.all().empty() && heard.all().back() == "lost"; }));
  }
  const std::vector<std::string> seen = heard.all();
  ASSERT_GE(seen.size(), 2u) << lines.timed();
  EXPECT_EQ("failure", seen.front()) << lines.timed();
  EXPECT_EQ(1, std::count(seen.begin(), seen.end(), "lost"));
  const Metrics m = sem.metrics();
  EXPECT_GE(m.renewal_failures, seen.size() - 1) << lines.timed();
  EXPECT_EQ(1u, m.permits_lost);
}

// What a release of a lost permit promises is nothing: its entry is gone, or its lease is over,
// or its id holds someone else's ticket. It returns at once (before, it waited for three command
// timeouts and threw TimeoutError).
TEST_F(HungServerTest, ReleasingAPermitKnownLostReturnsExpiredAtOnceWhileTheServerHangs) {
  Heard heard;
  FairSemaphore sem(connection(), "hung-release", told(1s, heard));
  Permit permit = sem.acquire();
  const test::Stopped hung(server_.pid());
  ASSERT_TRUE(wait_until([&] { return !heard.all().empty() && heard.all().back() == "lost"; }));
  EXPECT_EQ(ReleaseResult::expired, permit.release());
  EXPECT_FALSE(permit.held());
  EXPECT_EQ(ReleaseResult::already_released, permit.release());
}

TEST_F(HungServerTest, ReleasingAPermitKnownLostSendsNothing) {
  SemaphoreOptions o = options(2);
  o.auto_renew = false;
  FairSemaphore sem(test::redis_options(), "lost-release", o);
  Permit permit = sem.acquire(2);
  ASSERT_EQ(EvictResult::holder, sem.evict(permit.id()));
  ASSERT_FALSE(permit.renew());  // found gone: lost
  Permit other = sem.acquire();  // the units passed on
  admin_.command({"CONFIG", "RESETSTAT"});
  EXPECT_EQ(ReleaseResult::expired, permit.release(1));
  EXPECT_FALSE(permit.held());
  EXPECT_EQ(0, script_calls());
  EXPECT_EQ(1u, sem.status().holders.size());
}

// Permit::release says it is retried once: two attempts, not three.
TEST_F(HungServerTest, AReleaseThatCannotReachTheServerIsRetriedOnce) {
  ConnectionOptions c = connection();
  c.command_timeout = 200ms;
  SemaphoreOptions o = options(1);
  o.auto_renew = false;
  LogLines lines;
  o.logger = lines.logger();
  FairSemaphore sem(c, "retried-release", o);
  Permit permit = sem.acquire();
  const test::Stopped hung(server_.pid());
  EXPECT_THROW((void)permit.release(), TimeoutError);
  const std::vector<std::string> logged = lines.lines();
  EXPECT_EQ(1, std::count_if(logged.begin(), logged.end(),
                             [](const std::string& line) {
                               return line.find("release interrupted") != std::string::npos;
                             }))
      << lines.timed();
}

}  // namespace
}  // namespace fairsem
