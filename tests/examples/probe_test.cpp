// fairsem-probe run against the test's server: it names the server it talks to (Redis or
// Valkey), its own version and its mode, as `redis-server --version` and INFO tell them.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cctype>
#include <optional>
#include <string>

#include "child_process.hpp"
#include "server_build.hpp"
#include "test_env.hpp"

#ifndef FAIRSEM_EXAMPLE_PROBE
#error "the path of fairsem-probe must be defined by the build"
#endif

namespace {

using fairsem::test::ChildProcess;
using fairsem::test::RedisEnvironment;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(ProbeExample, NamesTheServerItsVersionAndItsMode) {
  ChildProcess child(
      {FAIRSEM_EXAMPLE_PROBE, "--url", RedisEnvironment::instance().url(), "--samples", "5"});
  const std::string out = child.read_to_eof();
  const std::optional<int> status = child.wait_exit();
  ASSERT_TRUE(status.has_value()) << "fairsem-probe did not exit";
  ASSERT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << out << child.stderr_text();
  const std::string first_line = out.substr(0, out.find('\n'));
  EXPECT_THAT(first_line, HasSubstr(" talking to ")) << out;
  EXPECT_THAT(first_line, HasSubstr("(standalone")) << out;

  // The name and version the binary itself gives, when this process started the server.
  const fairsem::test::RedisServer* server = RedisEnvironment::instance().server();
  ASSERT_NE(server, nullptr) << "this test needs the harness's own server, not "
                                "FAIRSEM_TEST_REDIS_URL";
  const fairsem::test::ServerBuild& build = fairsem::test::server_build(server->binary());
  std::string name = build.name;
  name[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(name[0])));
  EXPECT_THAT(first_line, HasSubstr(" talking to " + name + " " + build.version + " (standalone"))
      << out;
  if (build.name == "redis") {
    EXPECT_THAT(first_line, HasSubstr("(standalone) at 127.0.0.1:")) << out;
  } else {
    // Valkey's redis_version is the Redis version it is compatible with: shown apart.
    EXPECT_THAT(first_line, HasSubstr("(standalone; redis_version ")) << out;
    EXPECT_THAT(first_line, Not(HasSubstr("redis_version " + build.version))) << out;
  }
}

}  // namespace
