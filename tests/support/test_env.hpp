#pragma once

// The GoogleTest environment shared by every integration test binary: one redis-server per
// test process (or FAIRSEM_TEST_REDIS_URL), and names that never collide between tests.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "fairsem/connection_options.hpp"
#include "fairsem/semaphore_options.hpp"
#include "redis_server.hpp"

namespace fairsem::test {

class RedisEnvironment : public ::testing::Environment {
 public:
  void SetUp() override;
  void TearDown() override;

  /// The environment registered by the test main.
  static RedisEnvironment& instance();

  /// Options for the server under test (short timeouts so failures show quickly).
  ConnectionOptions options() const;
  std::string url() const { return url_; }
  /// The server this process started, or nullptr when FAIRSEM_TEST_REDIS_URL points elsewhere.
  RedisServer* server() const { return server_.get(); }

 private:
  std::string url_;
  std::unique_ptr<RedisServer> server_;
};

/// Shorthands for RedisEnvironment::instance().
inline ConnectionOptions redis_options() { return RedisEnvironment::instance().options(); }

/// "redis://" + rest, or when the test server speaks TLS, "rediss://" + rest + its TLS query
/// ("?cacert=..."): for tests that write their own URLs.
std::string test_url(const std::string& rest);

/// Path of Debian's libfaketime.so.1 (package faketime), or "" when it is not installed.
std::string find_libfaketime();

/// A key prefix no other test (in this or another process) uses: "t:<pid>:<Suite>.<Test>:<n>".
std::string unique_prefix();

/// Options for a semaphore of `limit` units and `lease`, under a prefix of its own
/// (unique_prefix()).
SemaphoreOptions unique_options(long long limit,
                                std::chrono::milliseconds lease = std::chrono::seconds(10));

}  // namespace fairsem::test
