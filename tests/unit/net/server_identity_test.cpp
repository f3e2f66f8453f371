// Telling Redis from Valkey, and their versions and modes, from the text they answer INFO
// server with (excerpts of the real replies), and the test harness's checks built on it.

#include <gtest/gtest.h>

#include <fairsem/impl/protocol/server_support.hpp>
#include <fairsem/server_info.hpp>

#include <optional>
#include <stdexcept>
#include <string>

#include "server_build.hpp"

namespace {

using fairsem::parse_server_identity;
using fairsem::ServerIdentity;
using fairsem::test::ExpectedServer;
using fairsem::test::parse_expected_server;
using fairsem::test::parse_server_build;
using fairsem::test::server_mismatch;

// Redis 7.0.15 (Debian 12), INFO server.
constexpr const char* kRedis7 =
    "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\n"
    "redis_build_id:ae4d7c971a948f0\r\nredis_mode:standalone\r\nos:Linux 6.1 x86_64\r\n";
// Redis 6.2.16, INFO server.
constexpr const char* kRedis62 =
    "# Server\r\nredis_version:6.2.16\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\n"
    "redis_build_id:6269793a3a4c796\r\nredis_mode:cluster\r\n";
// Valkey 8.0.1, INFO server: its own name and version, and server_mode instead of redis_mode.
constexpr const char* kValkey8 =
    "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.1\r\n"
    "redis_git_sha1:00000000\r\nredis_git_dirty:1\r\nredis_build_id:232f77d57db794d2\r\n"
    "server_mode:standalone\r\nos:Linux 6.1 x86_64\r\n";
// Valkey 8.0.1 started with --sentinel.
constexpr const char* kValkey8Sentinel =
    "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.1\r\n"
    "server_mode:sentinel\r\n";

TEST(ServerIdentityTest, RedisIsNamedByItsVersionField) {
  const ServerIdentity id = parse_server_identity(kRedis7);
  EXPECT_EQ(id.name, "redis");
  EXPECT_EQ(id.version, "7.0.15");
  EXPECT_EQ(id.redis_version, "7.0.15");
  EXPECT_EQ(id.mode, "standalone");
  EXPECT_EQ(parse_server_identity(kRedis62).mode, "cluster");
}

TEST(ServerIdentityTest, ValkeyGivesItsOwnNameVersionAndMode) {
  const ServerIdentity id = parse_server_identity(kValkey8);
  EXPECT_EQ(id.name, "valkey");
  EXPECT_EQ(id.version, "8.0.1");
  EXPECT_EQ(id.redis_version, "7.2.4") << "redis_version keeps its meaning";
  EXPECT_EQ(id.mode, "standalone");
  EXPECT_EQ(parse_server_identity(kValkey8Sentinel).mode, "sentinel");
}

TEST(ServerIdentityTest, LinesEndingInNewlineOnlyAndMissingFieldsAreFine) {
  const ServerIdentity id = parse_server_identity("redis_version:6.0.9\nredis_mode:sentinel");
  EXPECT_EQ(id.version, "6.0.9");
  EXPECT_EQ(id.mode, "sentinel");
  const ServerIdentity none = parse_server_identity("# Server\r\nos:Linux\r\n");
  EXPECT_EQ(none.name, "");
  EXPECT_EQ(none.version, "");
  EXPECT_EQ(none.mode, "");
  // A field is matched whole: redis_version_x is not redis_version.
  EXPECT_EQ(parse_server_identity("redis_version_x:1\r\nredis_version:2.0.0\r\n").version, "2.0.0");
}

TEST(ServerBuildTest, ParsesWhatRedisAndValkeyPrintForVersion) {
  const auto redis = parse_server_build(
      "Redis server v=6.2.16 sha=00000000:0 malloc=libc bits=64 build=6269793a3a4c796\n");
  ASSERT_TRUE(redis.has_value());
  EXPECT_EQ(redis->name, "redis");
  EXPECT_EQ(redis->version, "6.2.16");
  EXPECT_EQ(redis->major, 6);
  EXPECT_FALSE(fairsem::test::accepts_enable_debug_command(*redis));
  EXPECT_FALSE(fairsem::test::accepts_cluster_port(*redis));

  const auto valkey = parse_server_build(
      "Valkey server v=8.0.1 sha=00000000:1 malloc=libc bits=64 build=232f77d57db794d2\n");
  ASSERT_TRUE(valkey.has_value());
  EXPECT_EQ(valkey->name, "valkey");
  EXPECT_EQ(valkey->version, "8.0.1");
  EXPECT_TRUE(fairsem::test::accepts_enable_debug_command(*valkey));
  EXPECT_TRUE(fairsem::test::accepts_cluster_port(*valkey));

  const auto redis7 = parse_server_build("Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc");
  ASSERT_TRUE(redis7.has_value());
  EXPECT_TRUE(fairsem::test::accepts_enable_debug_command(*redis7));

  EXPECT_FALSE(parse_server_build("").has_value());
  EXPECT_FALSE(parse_server_build("redis-cli 7.0.15").has_value());
  EXPECT_FALSE(parse_server_build("Redis server v=unknown").has_value());
}

TEST(ExpectedServerTest, MatchesNameAndVersionOrVersionPrefixAtADot) {
  const ServerIdentity valkey = parse_server_identity(kValkey8);
  const ServerIdentity redis = parse_server_identity(kRedis7);
  EXPECT_EQ(server_mismatch(parse_expected_server("valkey 8.0.1"), valkey), "");
  EXPECT_EQ(server_mismatch(parse_expected_server("Valkey 8"), valkey), "");
  EXPECT_EQ(server_mismatch(parse_expected_server("valkey"), valkey), "");
  EXPECT_EQ(server_mismatch(parse_expected_server("redis 7.0.15"), redis), "");
  EXPECT_EQ(server_mismatch(parse_expected_server("  redis   7.0 "), redis), "");

  // Valkey's redis_version (7.2.4) does not make it Redis 7.2.4.
  EXPECT_EQ(server_mismatch(parse_expected_server("redis 7.2.4"), valkey),
            "FAIRSEM_TEST_EXPECT_SERVER is 'redis 7.2.4', but the server is valkey 8.0.1 "
            "(redis_version 7.2.4)");
  EXPECT_EQ(server_mismatch(parse_expected_server("redis 7.0.1"), redis),
            "FAIRSEM_TEST_EXPECT_SERVER is 'redis 7.0.1', but the server is redis 7.0.15");
  EXPECT_NE(server_mismatch(parse_expected_server("redis 7.0.1"), redis), "")
      << "7.0.1 is not a prefix of 7.0.15 at a dot";
  EXPECT_NE(server_mismatch(parse_expected_server("valkey 8.0.1"), redis), "");
  EXPECT_NE(server_mismatch(parse_expected_server("redis"), ServerIdentity{}), "");
}

TEST(ExpectedServerTest, MalformedValuesAreRefusedNamingTheVariable) {
  for (const char* bad : {"", "   ", "redis 7.0.15 extra"}) {
    try {
      (void)parse_expected_server(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("FAIRSEM_TEST_EXPECT_SERVER is '"), std::string::npos)
          << e.what();
    }
  }
}

// How servers too old for fairsem (or with a command disabled) refuse what it relies on.
TEST(ServerSupportTest, RecognisesTheRefusalsOfServersThatLackWhatFairsemUses) {
  using fairsem::detail::missing_server_feature;
  // BRPOP's timeout before Redis 6.0.
  EXPECT_EQ(missing_server_feature("ERR timeout is not an integer or out of range"),
            "BRPOP with a timeout in fractions of a second (Redis 6.0)");
  // A script writing after TIME before Redis 5.0.
  EXPECT_NE(missing_server_feature(
                "ERR Error running script (call to f_0): @user_script:2: @user_script: 2: Write "
                "commands not allowed after non deterministic commands. Call "
                "redis.replicate_commands() at the start of your script in order to switch to "
                "single commands replication mode."),
            std::nullopt);
  // A command the script calls, missing (ZPOPMIN before 5.0) or disabled: Redis 6.2, 7, Valkey.
  for (const char* refusal :
       {"ERR Error running script (call to f_1): @user_script:1: @user_script: 1: Unknown Redis "
        "command called from Lua script",
        "ERR Unknown Redis command called from script script: 104a, on @user_script:1.",
        "ERR Unknown command called from script script: 104a, on @user_script:1."}) {
    EXPECT_NE(missing_server_feature(refusal), std::nullopt) << refusal;
  }
  // Everything else is not about the server's version.
  EXPECT_EQ(missing_server_feature("ERR timeout is not a float or out of range"), std::nullopt);
  EXPECT_EQ(missing_server_feature("WRONGTYPE Operation against a key holding the wrong kind"),
            std::nullopt);
  EXPECT_EQ(missing_server_feature("NOPERM this user has no permissions"), std::nullopt);
}

TEST(ServerSupportTest, TheMessageNamesWhatIsMissingTheMinimumAndTheServer) {
  EXPECT_EQ(fairsem::detail::unsupported_server_message(
                "fairsem: semaphore 's' on 127.0.0.1:6379: waiting for a wake-up failed",
                "BRPOP with a timeout in fractions of a second (Redis 6.0)", "Redis 5.0.14",
                "ERR timeout is not an integer or out of range"),
            "fairsem: semaphore 's' on 127.0.0.1:6379: waiting for a wake-up failed: this server "
            "lacks BRPOP with a timeout in fractions of a second (Redis 6.0); fairsem needs "
            "Redis >= 6.0 or Valkey, and this server is Redis 5.0.14 (it replied: ERR timeout is "
            "not an integer or out of range)");
}

}  // namespace
