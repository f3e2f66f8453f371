#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fairsem/connection_options.hpp>

#include <functional>
#include <string>

namespace {

using fairsem::ConnectionOptions;
using namespace std::chrono_literals;

std::string validation_error(const std::function<void(ConnectionOptions&)>& change) {
  ConnectionOptions o;
  change(o);
  try {
    o.validate();
  } catch (const fairsem::InvalidArgument& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(OptionsTest, DefaultsAreValid) {
  ConnectionOptions o;
  EXPECT_NO_THROW(o.validate());
  EXPECT_EQ(o.endpoint(), "127.0.0.1:6379");
  EXPECT_GT(o.connect_timeout.count(), 0);
  EXPECT_GT(o.command_timeout.count(), 0);
}

TEST(OptionsTest, EachBadFieldIsNamed) {
  using ::testing::HasSubstr;
  EXPECT_THAT(validation_error([](auto& o) { o.port = 0; }), HasSubstr("port 0 is out of range"));
  EXPECT_THAT(validation_error([](auto& o) { o.port = 70000; }),
              HasSubstr("port 70000 is out of range"));
  EXPECT_THAT(validation_error([](auto& o) { o.host.clear(); }), HasSubstr("host is empty"));
  EXPECT_THAT(validation_error([](auto& o) { o.host = "a b"; }), HasSubstr("whitespace"));
  EXPECT_THAT(validation_error([](auto& o) { o.unix_path = "rel.sock"; }),
              HasSubstr("not an absolute path"));
  EXPECT_THAT(validation_error([](auto& o) { o.db = -1; }), HasSubstr("db -1 is negative"));
  EXPECT_THAT(validation_error([](auto& o) { o.connect_timeout = 0ms; }),
              HasSubstr("connect_timeout must be positive, got 0 ms"));
  EXPECT_THAT(validation_error([](auto& o) { o.command_timeout = -5ms; }),
              HasSubstr("command_timeout must be positive, got -5 ms"));
  EXPECT_THAT(validation_error([](auto& o) { o.reconnect_attempts = 0; }),
              HasSubstr("reconnect_attempts must be at least 1"));
  EXPECT_THAT(validation_error([](auto& o) { o.reconnect_backoff_min = 0ms; }),
              HasSubstr("reconnect_backoff_min must be positive"));
  EXPECT_THAT(validation_error([](auto& o) {
                o.reconnect_backoff_min = 100ms;
                o.reconnect_backoff_max = 50ms;
              }),
              HasSubstr("reconnect_backoff_max (50 ms) is below reconnect_backoff_min (100 ms)"));
}

TEST(OptionsTest, UnixPathMakesHostAndPortIrrelevant) {
  ConnectionOptions o;
  o.unix_path = "/run/redis.sock";
  o.port = 0;
  o.host.clear();
  EXPECT_NO_THROW(o.validate());
  EXPECT_EQ(o.endpoint(), "unix:/run/redis.sock");
}

TEST(OptionsTest, ValidationMessagesNeverContainThePassword) {
  ConnectionOptions o;
  o.password = "SECRET";
  o.port = -3;
  try {
    o.validate();
    FAIL();
  } catch (const fairsem::InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()).find("SECRET"), std::string::npos);
  }
}

}  // namespace
