// Embedded Lua scripts run with EVALSHA; a server that has lost them (SCRIPT FLUSH, restart)
// gets them again with SCRIPT LOAD and the call is retried once, invisibly to the caller.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fairsem/fairsem.hpp>
#include <fairsem/impl/net/connection.hpp>
#include <fairsem/server_info.hpp>

#include <cctype>
#include <chrono>
#include <string>

#include "semaphore_fixture.hpp"
#include "server_build.hpp"
#include "test_env.hpp"

namespace {

using fairsem::ReplyError;
using fairsem::detail::Connection;
using fairsem::detail::Script;
using fairsem::test::redis_options;
using fairsem::test::server_ms;
using fairsem::test::unique_prefix;
using ::testing::HasSubstr;

long long commandstat_calls(Connection& c, const std::string& command) {
  const std::string info = c.command({"INFO", "commandstats"}).str;
  const std::string key = "cmdstat_" + command + ":calls=";
  auto pos = info.find(key);
  if (pos == std::string::npos) return 0;
  return std::stoll(info.substr(pos + key.size()));
}

/// SCRIPT calls: from Redis 7.0 INFO commandstats counts each subcommand apart
/// (cmdstat_script|load), before it counts them all as cmdstat_script.
long long script_calls(Connection& c, const std::string& subcommand) {
  return commandstat_calls(c, "script|" + subcommand) + commandstat_calls(c, "script");
}

TEST(ScriptTest, EmbeddedShaIsTheOneRedisComputes) {
  Connection c(redis_options());
  const auto& s = fairsem::detail::scripts::server_clock;
  EXPECT_EQ(s.sha1.size(), 40u);
  EXPECT_EQ(c.command({"SCRIPT", "LOAD", s.body}).str, s.sha1);
}

TEST(ScriptTest, ServerClockScriptReturnsTheServersTime) {
  Connection c(redis_options());
  const long long before = server_ms(c);
  const long long got = c.eval(fairsem::detail::scripts::server_clock, {}, {}).integer;
  const long long after = server_ms(c);
  EXPECT_GE(got, before);
  EXPECT_LE(got, after);
}

TEST(ScriptTest, ScriptFlushBetweenCallsChangesNothingForTheCaller) {
  Connection c(redis_options());
  Connection admin(redis_options());
  const auto& s = fairsem::detail::scripts::server_clock;
  EXPECT_GT(c.eval(s, {}, {}).integer, 0);
  admin.command({"SCRIPT", "FLUSH"});
  EXPECT_EQ(admin.command({"SCRIPT", "EXISTS", s.sha1}).elements.at(0).integer, 0);

  const long long loads_before = script_calls(admin, "load");  // on 6.2: every SCRIPT call
  EXPECT_GT(c.eval(s, {}, {}).integer, 0);  // NOSCRIPT → SCRIPT LOAD → EVALSHA, no error
  EXPECT_EQ(script_calls(admin, "load"), loads_before + 1);
  EXPECT_EQ(admin.command({"SCRIPT", "EXISTS", s.sha1}).elements.at(0).integer, 1);
}

TEST(ScriptTest, KeysAndArgumentsReachTheScriptBinarySafe) {
  Connection c(redis_options());
  const std::string body = "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[1])";
  Connection admin(redis_options());
  const std::string sha = admin.command({"SCRIPT", "LOAD", body}).str;
  const Script echo{"echo_test", body, sha, nullptr, {}};
  const std::string value("x\0y\r\nz", 6);
  EXPECT_EQ(c.eval(echo, {unique_prefix()}, {value}).str, value);
}

TEST(ScriptTest, ScriptErrorIsAReplyErrorNamingTheScript) {
  Connection c(redis_options());
  const std::string key = unique_prefix();
  c.command({"SET", key, "a string"});
  const std::string body = "return redis.call('ZADD', KEYS[1], 1, 'm')";
  Connection admin(redis_options());
  const std::string sha = admin.command({"SCRIPT", "LOAD", body}).str;
  const Script wrong{"zadd_test", body, sha, nullptr, {}};
  try {
    c.eval(wrong, {key}, {});
    FAIL();
  } catch (const ReplyError& e) {
    EXPECT_THAT(e.what(), HasSubstr("script zadd_test on " + c.endpoint()));
    EXPECT_THAT(e.server_message(), HasSubstr("WRONGTYPE"));
  }
  EXPECT_EQ(c.command({"GET", key}).str, "a string") << "the foreign key is untouched";
  EXPECT_FALSE(c.broken());
}

TEST(ScriptTest, ProbeServerReportsVersionClockAndRoundTrips) {
  auto info = fairsem::probe_server(redis_options(), 20);
  EXPECT_THAT(info.redis_version, ::testing::MatchesRegex("[0-9]+\\.[0-9]+\\.[0-9]+"));
  EXPECT_THAT(info.server_version, ::testing::MatchesRegex("[0-9]+\\.[0-9]+\\.[0-9]+"));
  EXPECT_EQ(info.redis_mode, "standalone");  // redis_mode, or server_mode on Valkey
  if (const auto* server = fairsem::test::RedisEnvironment::instance().server()) {
    // What the binary says of itself: "Redis server v=7.0.15", "Valkey server v=8.0.1".
    const auto& build = fairsem::test::server_build(server->binary());
    EXPECT_EQ(info.server_name, build.name);
    EXPECT_EQ(info.server_version, build.version);
    if (build.name == "redis") {
      EXPECT_EQ(info.redis_version, build.version);
    }
  } else {
    EXPECT_THAT(info.server_name, ::testing::AnyOf("redis", "valkey"));
  }
  EXPECT_EQ(info.samples, 20);
  EXPECT_GT(info.ping_min.count(), 0);
  EXPECT_LE(info.ping_min, info.ping_median);
  EXPECT_GT(info.script_median.count(), 0);
  Connection c(redis_options());
  const auto server_now =
      std::chrono::system_clock::time_point(std::chrono::milliseconds(server_ms(c)));
  EXPECT_LE(info.server_time, server_now);
  // Same machine, same clock: the estimated offset is small (it is what the demo prints).
  EXPECT_LT(std::chrono::abs(info.clock_offset), std::chrono::seconds(1));
  EXPECT_THROW((void)fairsem::probe_server(redis_options(), 0), fairsem::InvalidArgument);
}

// A server that lacks a command the script calls (Redis < 5.0 has no ZPOPMIN; here an operator
// disabled TIME with rename-command) is refused with a message naming the server.
TEST(ScriptTest, AServerLackingACommandTheScriptCallsIsNamedInTheError) {
  fairsem::test::RedisServer server({"--rename-command", "TIME", ""});
  const auto& build = fairsem::test::server_build(server.binary());
  std::string name = build.name;
  name[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(name[0])));
  fairsem::SemaphoreOptions o;
  o.limit = 1;
  fairsem::FairSemaphore sem(fairsem::ConnectionOptions::from_url(server.url()), "old", o);
  try {
    (void)sem.try_acquire();  // the first operation that reads the server's clock
    ADD_FAILURE() << "acquired on a server without TIME";
  } catch (const ReplyError& e) {
    EXPECT_THAT(e.what(), HasSubstr(": acquire failed: this server lacks a command fairsem's "
                                    "script calls"));
    EXPECT_THAT(e.what(), HasSubstr("; fairsem needs Redis >= 6.0 or Valkey, and this server is " +
                                    name + " " + build.version + " (it replied: ERR "));
    EXPECT_THAT(e.server_message(), HasSubstr("command called from"));
  }
}

}  // namespace
