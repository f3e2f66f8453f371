// Observability: the logger hook (off unless set) and what it receives.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "fairsem/detail/connection.hpp"
#include "fairsem/fairsem.hpp"
#include "test_env.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using detail::Connection;
using test::redis_options;
using ::testing::HasSubstr;

/// Collects what fairsem hands to the logger (any thread).
class LogLines {
 public:
  Logger logger() {
    return [this](LogLevel, std::string_view message) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.emplace_back(message);
    };
  }
  std::vector<std::string> lines() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

class ObservabilityTest : public ::testing::Test {
 protected:
  SemaphoreOptions options(long long limit, std::chrono::milliseconds lease = 10s) {
    SemaphoreOptions o;
    o.limit = limit;
    o.lease = lease;
    o.key_prefix = prefix_;
    return o;
  }
  std::string key(const std::string& name, const std::string& suffix) const {
    return prefix_ + ":{" + name + "}:" + suffix;
  }
  /// Removes every holder of `name` behind its back, as an operator's DEL would.
  void delete_holders(const std::string& name) {
    admin_.command({"DEL", key(name, "owner"), key(name, "time")});
  }

  std::string prefix_ = test::unique_prefix();
  Connection admin_{redis_options()};
};

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
