#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fairsem/connection_options.hpp>

#include <string>

namespace {

using fairsem::ConnectionOptions;
using fairsem::InvalidArgument;

struct GoodUrl {
  std::string url;
  std::string host;
  int port;
  std::string unix_path;
  std::string user;
  std::string password;
  int db;
};

class GoodUrlTest : public ::testing::TestWithParam<GoodUrl> {};

TEST_P(GoodUrlTest, ParsesEveryField) {
  const GoodUrl& g = GetParam();
  ConnectionOptions o = ConnectionOptions::from_url(g.url);
  EXPECT_EQ(o.host, g.host);
  EXPECT_EQ(o.port, g.port);
  EXPECT_EQ(o.unix_path, g.unix_path);
  EXPECT_EQ(o.user, g.user);
  EXPECT_EQ(o.password, g.password);
  EXPECT_EQ(o.db, g.db);
}

INSTANTIATE_TEST_SUITE_P(
    Urls, GoodUrlTest,
    ::testing::Values(
        GoodUrl{"redis://127.0.0.1", "127.0.0.1", 6379, "", "", "", 0},
        GoodUrl{"redis://localhost:6380", "localhost", 6380, "", "", "", 0},
        GoodUrl{"redis://localhost:6380/", "localhost", 6380, "", "", "", 0},
        GoodUrl{"redis://localhost/3", "localhost", 6379, "", "", "", 3},
        GoodUrl{"redis://alice:s3cret@h:1/15", "h", 1, "", "alice", "s3cret", 15},
        GoodUrl{"redis://:onlypass@h", "h", 6379, "", "", "onlypass", 0},
        GoodUrl{"redis://alice@h", "h", 6379, "", "alice", "", 0},
        GoodUrl{"redis://al%69ce:p%40ss%3Aw%2Fd%25@h:65535", "h", 65535, "", "alice", "p@ss:w/d%",
                0},
        // An unencoded '@' or '/' in the password still parses: the last '@' ends the user info.
        GoodUrl{"redis://u:a@b/c@h:7/2", "h", 7, "", "u", "a@b/c", 2},
        GoodUrl{"redis://[::1]:6379", "::1", 6379, "", "", "", 0},
        GoodUrl{"redis://[::1]", "::1", 6379, "", "", "", 0},
        GoodUrl{"redis://u:p@[fe80::1%25lo]:7000/4", "fe80::1%lo", 7000, "", "u", "p", 4},
        GoodUrl{"REDIS://H:1", "H", 1, "", "", "", 0},
        GoodUrl{"Unix:///r.sock", "127.0.0.1", 6379, "/r.sock", "", "", 0},
        GoodUrl{"unix:///run/redis.sock", "127.0.0.1", 6379, "/run/redis.sock", "", "", 0},
        GoodUrl{"unix:///run/redis.sock?db=9", "127.0.0.1", 6379, "/run/redis.sock", "", "", 9},
        GoodUrl{"unix:///tmp/my%20dir/r.sock", "127.0.0.1", 6379, "/tmp/my dir/r.sock", "", "", 0},
        GoodUrl{"unix://bob:pw@/run/redis.sock?db=1", "127.0.0.1", 6379, "/run/redis.sock", "bob",
                "pw", 1}));

struct BadUrl {
  std::string url;
  std::string message;  // must appear in what()
};

class BadUrlTest : public ::testing::TestWithParam<BadUrl> {};

TEST_P(BadUrlTest, ThrowsInvalidArgumentNamingThePart) {
  const BadUrl& b = GetParam();
  try {
    (void)ConnectionOptions::from_url(b.url);
    FAIL() << "accepted " << b.url;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(b.message), std::string::npos) << "message: " << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Urls, BadUrlTest,
    ::testing::Values(
        BadUrl{"", "the URL is empty"},
        BadUrl{"127.0.0.1:6379", "scheme must be redis://, rediss:// (TLS), unix://"},
        BadUrl{"http://h", "scheme must be redis://, rediss:// (TLS), unix://"},
        BadUrl{"redis://", "host is missing"}, BadUrl{"redis://:6379", "host is missing"},
        BadUrl{"redis://u:p@", "host is missing"}, BadUrl{"redis://h:", "port is empty"},
        BadUrl{"redis://h:abc", "the port is not a number"},
        BadUrl{"redis://h:-1", "the port is not a number"},
        BadUrl{"redis://h:0", "port 0 is out of range 1-65535"},
        BadUrl{"redis://h:65536", "port 65536 is out of range 1-65535"},
        BadUrl{"redis://h:99999999999999999999999", "out of range"},
        BadUrl{"redis://h/-1", "database index -1 is negative"},
        BadUrl{"redis://h/x", "database 'x' is not a number"},
        BadUrl{"redis://h/99999999999", "database index 99999999999 is too large"},
        BadUrl{"redis://h/1/2", "the path may only hold the database number"},
        BadUrl{"redis://h?db=1", "query parameters are not supported"},
        BadUrl{"redis://h/1?x=1", "query parameters are not supported in redis:// URLs"},
        BadUrl{"redis://h/1#x", "fragment"},
        BadUrl{"redis://h?cacert=/ca.pem", "'cacert' is a TLS setting: use rediss://"},
        BadUrl{"redis-cluster://a:1?insecure=true", "'insecure' is a TLS setting"},
        BadUrl{"unix:///r.sock?sni=x", "'sni' is a TLS setting"},
        BadUrl{"redis://h#frag", "fragment"},
        BadUrl{"redis://::1:6379", "IPv6 host must be in brackets"},
        BadUrl{"redis://[::1:6379", "missing its closing ']'"},
        BadUrl{"redis://[::1]x", "unexpected characters after the IPv6 host"},
        BadUrl{"redis://[]:1", "brackets may only enclose an IPv6 address"},
        BadUrl{"redis://[localhost]:1", "brackets may only enclose an IPv6 address"},
        BadUrl{"redis://a]:1", "'[' or ']' outside an IPv6 address"},
        BadUrl{"unix:///r.sock?db=", "query parameter 'db' needs a value"},
        BadUrl{"unix:///r%00.sock", "NUL byte"},
        BadUrl{"unix:///" + std::string(200, 'x'), "a Unix socket path holds at most 107"},
        BadUrl{"redis://my host", "host contains whitespace"},
        BadUrl{"redis://u%zz:p@h", "malformed percent-encoding in the user name"},
        BadUrl{"redis://u:p%4@h", "malformed percent-encoding in the password"},
        BadUrl{"unix://", "the socket path must be absolute"},
        BadUrl{"unix://relative.sock", "the socket path must be absolute"},
        BadUrl{"unix:///", "the socket path is missing"},
        BadUrl{"unix:///r.sock?db=-2", "database index -2 is negative"},
        BadUrl{"unix:///r.sock?timeout=1", "unknown query parameter 'timeout'"},
        BadUrl{"unix:///r.sock?db", "query parameter 'db' needs a value"},
        BadUrl{"unix:///r%2.sock", "malformed percent-encoding in the socket path"},
        BadUrl{"redis://a:1,b:2/3", "Redis Cluster has only database 0, the URL selects 3"},
        BadUrl{"redis://a:1,", "host is missing"}, BadUrl{"redis://a:1,b:0", "port 0 is out"},
        BadUrl{"redis://a:1,::1:2", "IPv6 host must be in brackets"},
        BadUrl{"redis-cluster://a:1/2", "Redis Cluster has only database 0"},
        BadUrl{"redis-cluster://", "host is missing"},
        BadUrl{"redis-sentinel://s:1", "the master name is missing"},
        BadUrl{"redis-sentinel://s:1/", "the master name is missing"},
        BadUrl{"redis-sentinel://s:1?x", "the master name is missing"},
        BadUrl{"redis-sentinel://s:1/m/x", "database 'x' is not a number"},
        BadUrl{"redis-sentinel://s:1/m%20x", "master name contains whitespace"},
        BadUrl{"redis-sentinel://s:1/m%zz", "malformed percent-encoding in the master name"},
        BadUrl{"redis-sentinel://,s:1/m", "host is missing"}));

TEST(UrlTest, SeveralHostsAreClusterSeeds) {
  const ConnectionOptions o = ConnectionOptions::from_url("redis://u:pw@a:7000,[::1]:7001,c:6379");
  EXPECT_TRUE(o.cluster);
  EXPECT_EQ(o.host, "a");
  EXPECT_EQ(o.port, 7000);
  ASSERT_EQ(o.seeds.size(), 2U);
  EXPECT_EQ(o.seeds[0], (fairsem::NodeAddress{"::1", 7001}));
  EXPECT_EQ(o.seeds[1], (fairsem::NodeAddress{"c", 6379}));
  EXPECT_EQ(o.user, "u");
  EXPECT_EQ(o.password, "pw");
  EXPECT_EQ(o.endpoint(), "cluster a:7000,[::1]:7001,c:6379");
  EXPECT_EQ(o.redacted_url(), "redis-cluster://u:***@a:7000,[::1]:7001,c:6379");
  // The redacted URL parses back to the same deployment.
  const ConnectionOptions again = ConnectionOptions::from_url(o.redacted_url());
  EXPECT_TRUE(again.cluster);
  EXPECT_EQ(again.seeds, o.seeds);
}

TEST(UrlTest, ErrorsQuoteSeveralNodesButNoPasswordWithoutAnAt) {
  auto message = [](const std::string& url) -> std::string {
    try {
      (void)ConnectionOptions::from_url(url);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "(accepted)";
  };
  EXPECT_THAT(message("redis://a:1,b:0"), ::testing::HasSubstr("'redis://a:1,b:0'"));
  // "user:password" with the host forgotten, the password holding ',' and ':'.
  const std::string m = message("redis://u:12,x:ab");
  EXPECT_THAT(m, ::testing::HasSubstr("'redis://u:***'"));
  EXPECT_THAT(m, ::testing::Not(::testing::HasSubstr("12,x")));
  // Without its last port it is refused, not taken for a cluster of "u:12" and "ab".
  const std::string portless = message("redis://u:12,ab");
  EXPECT_THAT(portless, ::testing::HasSubstr("each node of a cluster URL needs its port"));
  EXPECT_THAT(portless, ::testing::HasSubstr("'redis://u:***'"));
  EXPECT_THAT(portless, ::testing::Not(::testing::HasSubstr("12,ab")));
}

TEST(UrlTest, ClusterSchemeMarksOneSeedAsACluster) {
  const ConnectionOptions o = ConnectionOptions::from_url("redis-cluster://h:7000");
  EXPECT_TRUE(o.cluster);
  EXPECT_TRUE(o.seeds.empty());
  EXPECT_TRUE(o.routed());
  EXPECT_FALSE(ConnectionOptions::from_url("redis://h:7000").routed());
}

TEST(UrlTest, SentinelUrlNamesSentinelsMasterAndDatabase) {
  const ConnectionOptions o =
      ConnectionOptions::from_url("redis-sentinel://:pw@s1,s2:26380/my%2Dmaster/4");
  EXPECT_FALSE(o.cluster);
  EXPECT_EQ(o.sentinel_master, "my-master");
  ASSERT_EQ(o.sentinels.size(), 2U);
  EXPECT_EQ(o.sentinels[0], (fairsem::NodeAddress{"s1", 26379}));
  EXPECT_EQ(o.sentinels[1], (fairsem::NodeAddress{"s2", 26380}));
  EXPECT_EQ(o.password, "pw");
  EXPECT_EQ(o.db, 4);
  EXPECT_TRUE(o.routed());
  EXPECT_EQ(o.endpoint(), "sentinel master 'my-master' via s1:26379,s2:26380");
  EXPECT_EQ(o.redacted_url(), "redis-sentinel://:***@s1:26379,s2:26380/my-master/4");
}

TEST(UrlTest, DeploymentFieldsThatDoNotFitTogetherAreRefused) {
  auto message = [](const ConnectionOptions& o) -> std::string {
    try {
      o.validate();
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "(accepted)";
  };
  ConnectionOptions o;
  o.seeds.push_back({"h", 1});
  EXPECT_THAT(message(o), ::testing::HasSubstr("seeds are only used with cluster = true"));
  o = ConnectionOptions{};
  o.cluster = true;
  o.unix_path = "/r.sock";
  EXPECT_THAT(message(o), ::testing::HasSubstr("Redis Cluster is reached over TCP"));
  o = ConnectionOptions{};
  o.cluster = true;
  o.db = 1;
  EXPECT_THAT(message(o), ::testing::HasSubstr("Redis Cluster has only database 0, db is 1"));
  o = ConnectionOptions{};
  o.cluster = true;
  o.seeds.push_back({"h", 0});
  EXPECT_THAT(message(o), ::testing::HasSubstr("a seed node port 0 is out of range"));
  o = ConnectionOptions{};
  o.sentinel_master = "m";
  EXPECT_THAT(message(o), ::testing::HasSubstr("no sentinels are given"));
  o.sentinels.push_back({"", 26379});
  EXPECT_THAT(message(o), ::testing::HasSubstr("a sentinel has an empty host"));
  o.sentinels = {{"s", 26379}};
  o.cluster = true;
  EXPECT_THAT(message(o), ::testing::HasSubstr("cluster and sentinel_master exclude each other"));
  o.cluster = false;
  EXPECT_EQ(message(o), "(accepted)");
  o = ConnectionOptions{};
  o.sentinels = {{"s", 26379}};
  EXPECT_THAT(message(o), ::testing::HasSubstr("sentinel_master (the name) is empty"));
}

// Every malformed URL that carries a password: the message must not contain it, in any form.
TEST(UrlTest, ErrorsNeverEchoThePassword) {
  const std::string secret = "Hunter2SECRET";
  const std::string urls[] = {
      "redis://u:" + secret + "@h:99999",
      "redis://u:" + secret + "@h/x",
      "redis://u:" + secret + "@",
      "redis://u:" + secret + "@h:abc",
      "redis://u:" + secret + "%zz@h",
      "redis://u:" + secret + "@h?db=1",
      "redis://u:" + secret + "/x@h:1/y",
      "redis://u:" + secret + "@[::1",
      "redis://:" + secret + "@h/-1",
      "unix://u:" + secret + "@/s?x=1",
      "unix://u:" + secret + "@relative",
      "rediss://u:" + secret + "@h?nosuch=1",
      "rediss://u:" + secret + "@h/z",
      "rediss-sentinel://u:" + secret + "@s:1",
      "redis://" + secret + "@h:0",
      "redis://u:" + secret + "@h#f",
      "redis://u:" + secret,
      "redis://:" + secret,
      "redis://u:" + secret + "/0",
  };
  for (const std::string& url : urls) {
    try {
      (void)ConnectionOptions::from_url(url);
      ADD_FAILURE() << "accepted a malformed URL";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()).find("SECRET"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("***"), std::string::npos) << e.what();
    }
  }
}

TEST(UrlTest, RedactedUrlHidesThePassword) {
  auto o = ConnectionOptions::from_url("redis://alice:SECRET@10.0.0.1:7000/3");
  EXPECT_EQ(o.redacted_url(), "redis://alice:***@10.0.0.1:7000/3");
  EXPECT_EQ(ConnectionOptions::from_url("redis://[::1]:1").redacted_url(), "redis://[::1]:1");
  EXPECT_EQ(ConnectionOptions::from_url("unix://:SECRET@/r.sock?db=2").redacted_url(),
            "unix://:***@/r.sock?db=2");
}

TEST(UrlTest, EndpointNamesTheServerWithoutCredentials) {
  EXPECT_EQ(ConnectionOptions::from_url("redis://u:SECRET@h:7").endpoint(), "h:7");
  EXPECT_EQ(ConnectionOptions::from_url("redis://[::1]:7").endpoint(), "[::1]:7");
  EXPECT_EQ(ConnectionOptions::from_url("unix:///r.sock").endpoint(), "unix:/r.sock");
}

}  // namespace
