#pragma once

// What the semaphore tests share: a fixture with a unique key prefix, an admin connection and
// helpers to read the semaphore's keys; SemaphoreTest, the fixture of the suite spread over
// integration/semaphore_*test.cpp; and BackgroundWaiter, an acquire on a thread of its own.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/protocol/scripts.hpp"
#include "script_command.hpp"
#include "test_env.hpp"

namespace fairsem::test {

/// The server's clock (TIME), in ms: what the scripts read as `now`.
inline long long server_ms(detail::Connection& c) {
  const detail::Reply t = c.command({"TIME"});
  return std::stoll(t.elements.at(0).str) * 1000 + std::stoll(t.elements.at(1).str) / 1000;
}

class SemaphoreFixture : public ::testing::Test {
 protected:
  SemaphoreOptions options(long long limit,
                           std::chrono::milliseconds lease = std::chrono::seconds(10)) {
    SemaphoreOptions o;
    o.limit = limit;
    o.lease = lease;
    o.key_prefix = prefix_;
    return o;
  }
  std::string key(const std::string& name, const std::string& suffix) const {
    return prefix_ + ":{" + name + "}:" + suffix;
  }
  /// The KEYS of the semaphore script for `name`, for tests that run it directly.
  std::vector<std::string> script_keys(const std::string& name) const {
    return detail::semaphore_keys(prefix_, name);
  }
  /// Runs operation `args[0]` of semaphore `name` directly on `conn`: the script is given
  /// `limit` and a lease of `lease_ms` as its 2nd and 3rd arguments.
  detail::Reply run_op(detail::Connection& conn, const std::string& name, detail::Args args,
                       std::string_view limit, std::string_view lease_ms) {
    args.insert(args.begin() + 1, {limit, lease_ms});
    const std::vector<std::string> keys = script_keys(name);
    return conn.eval(detail::scripts::semaphore_script(args[0]),
                     detail::Args(keys.begin(), keys.end()), args);
  }
  long long server_ms() { return test::server_ms(admin_); }
  long long integer(std::initializer_list<std::string_view> argv) {
    return admin_.command(argv).integer;
  }
  /// Calls of a command since the last CONFIG RESETSTAT, from INFO commandstats.
  long long calls(const std::string& command) {
    const std::string info = admin_.command({"INFO", "commandstats"}).str;
    const std::string tag = "cmdstat_" + command + ":calls=";
    const auto at = info.find(tag);
    if (at == std::string::npos) return 0;
    return std::stoll(info.substr(at + tag.size()));
  }
  /// Calls of the semaphore's scripts since the last CONFIG RESETSTAT: FCALL (Redis 7+) or
  /// EVALSHA (Redis 6.2, or a connection that fell back to it).
  long long script_calls() { return calls("fcall") + calls("evalsha"); }
  bool has_functions() { return test::has_functions(admin_); }
  /// Every key of this test with its type and content, to prove that something changed
  /// nothing.
  std::map<std::string, std::string> snapshot() {
    std::map<std::string, std::string> out;
    for (const auto& k : admin_.command({"KEYS", prefix_ + "*"}).elements) {
      const std::string type = admin_.command({"TYPE", k.str}).str;
      detail::Reply content;
      if (type == "zset") {
        content = admin_.command({"ZRANGE", k.str, "0", "-1", "WITHSCORES"});
      } else if (type == "hash") {
        content = admin_.command({"HGETALL", k.str});
      } else if (type == "list") {
        content = admin_.command({"LRANGE", k.str, "0", "-1"});
      } else {
        content = admin_.command({"GET", k.str});
      }
      std::string text = type + ":";
      for (const auto& e : content.elements) text += e.str + "|";
      if (content.elements.empty()) text += content.str;
      out[k.str] = text;
    }
    return out;
  }

  std::string prefix_ = test::unique_prefix();
  detail::Connection admin_{redis_options()};
};

/// The fixture of the SemaphoreTest suite, whose tests are split over several files: one class
/// with external linkage, since GoogleTest requires every test of a suite to use the same one.
class SemaphoreTest : public SemaphoreFixture {};

/// An acquire (try_acquire_for, 20 s) of `units` on a thread of its own.
struct BackgroundWaiter {
  explicit BackgroundWaiter(FairSemaphore& sem, long long units = 1)
      : thread([this, &sem, units] {
          try {
            permit = sem.try_acquire_for(units, std::chrono::seconds(20));
          } catch (const std::exception& e) {
            error = e.what();
            thrown = std::current_exception();
          }
          done = true;
        }) {}
  ~BackgroundWaiter() {
    if (thread.joinable()) thread.join();
  }
  BackgroundWaiter(const BackgroundWaiter&) = delete;
  BackgroundWaiter& operator=(const BackgroundWaiter&) = delete;
  /// Waits for the acquire to end; its permit, or nullptr.
  Permit* result() {
    if (thread.joinable()) thread.join();
    EXPECT_EQ("", error);
    return permit ? &*permit : nullptr;
  }

  std::optional<Permit> permit;
  std::string error;
  std::exception_ptr thrown;
  std::atomic<bool> done{false};
  std::thread thread;  // last: started once the rest exists
};

}  // namespace fairsem::test
