#include "test_env.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "fairsem/impl/net/connection.hpp"
#include "server_build.hpp"

namespace fairsem::test {
namespace {
RedisEnvironment* g_instance = nullptr;
}

RedisEnvironment& RedisEnvironment::instance() {
  if (g_instance == nullptr) {
    throw std::logic_error("RedisEnvironment is not registered: link fairsem_test_main");
  }
  return *g_instance;
}

namespace {

// Not FAIL(): GoogleTest would then report every test as skipped, and ctest counts a skipped
// test as not run rather than failed. A missing or wrong server must fail loudly.
[[noreturn]] void fatal(const char* what, const char* why) {
  std::fprintf(stderr, "FATAL: %s: %s\n", what, why);
  std::fflush(stderr);
  std::_Exit(EXIT_FAILURE);
}

}  // namespace

void RedisEnvironment::SetUp() {
  g_instance = this;
  if (const char* external = std::getenv("FAIRSEM_TEST_REDIS_URL");
      external != nullptr && *external != '\0') {
    url_ = external;
    try {
      if (expected_server()) {
        detail::Connection conn(options());
        // The endpoint, not the URL: it may hold a password.
        check_expected_server(conn.command({"INFO", "server"}).str, options().endpoint());
      }
    } catch (const WrongServerError& e) {
      fatal("the tests would run against the wrong server", e.what());
    } catch (const std::exception& e) {
      fatal("cannot check FAIRSEM_TEST_REDIS_URL against FAIRSEM_TEST_EXPECT_SERVER", e.what());
    }
    return;
  }
  try {
    server_ = std::make_unique<RedisServer>();  // over TLS when FAIRSEM_TEST_TLS=1
    url_ = server_->url();
  } catch (const WrongServerError& e) {
    fatal("the tests would run against the wrong server", e.what());
  } catch (const std::exception& e) {
    fatal("cannot start the Redis server the tests need", e.what());
  }
}

void RedisEnvironment::TearDown() { server_.reset(); }

ConnectionOptions RedisEnvironment::options() const {
  ConnectionOptions opts = ConnectionOptions::from_url(url_);
  opts.connect_timeout = std::chrono::seconds(2);
  opts.command_timeout = std::chrono::seconds(5);
  opts.reconnect_backoff_min = std::chrono::milliseconds(10);
  opts.reconnect_backoff_max = std::chrono::milliseconds(200);
  return opts;
}

std::string test_url(const std::string& rest) {
  const ConnectionOptions o = redis_options();
  if (!o.tls.enabled) return "redis://" + rest;
  const std::string shown = o.redacted_url();
  const std::size_t query = shown.find('?');
  return "rediss://" + rest + (query == std::string::npos ? "" : shown.substr(query));
}

std::string find_libfaketime() {
  for (const char* path :
       {"/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1", "/usr/lib64/faketime/libfaketime.so.1"}) {
    if (::access(path, R_OK) == 0) return path;
  }
  return {};
}

std::string unique_prefix() {
  static std::atomic<int> counter{0};
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test = info != nullptr ? std::string(info->test_suite_name()) + "." + info->name()
                                     : std::string("no-test");
  return "t:" + std::to_string(::getpid()) + ":" + test + ":" + std::to_string(counter++);
}

SemaphoreOptions unique_options(long long limit, std::chrono::milliseconds lease) {
  SemaphoreOptions o;
  o.limit = limit;
  o.lease = lease;
  o.key_prefix = unique_prefix();
  return o;
}

}  // namespace fairsem::test
