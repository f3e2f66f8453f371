// TLS settings without a server: rediss:// URLs, TlsOptions validation, and what a build
// without TLS says. FAIRSEM_TEST_TLS is 1 when the library was built with TLS (FAIRSEM_TLS).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fairsem/connection_options.hpp>

#include <string>

namespace {

using fairsem::ConnectionOptions;
using fairsem::InvalidArgument;
using ::testing::HasSubstr;

/// what() of the InvalidArgument that `f` throws ("" when it throws none).
template <typename F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(TlsBuild, TlsSupportedSaysHowTheLibraryWasBuilt) {
  EXPECT_EQ(fairsem::tls_supported(), FAIRSEM_TEST_TLS != 0);
}

TEST(TlsOptionsTest, FieldsSetWithoutEnabledAreRefusedNotIgnored) {
  ConnectionOptions o;
  o.tls.cacert = "/etc/ssl/ca.pem";
  EXPECT_THAT(refusal([&] { o.validate(); }),
              HasSubstr("tls fields are set but tls.enabled is false (use rediss://)"));
  ConnectionOptions insecure;
  insecure.tls.insecure = true;
  EXPECT_THAT(refusal([&] { insecure.validate(); }), HasSubstr("tls.enabled is false"));
}

#if FAIRSEM_TEST_TLS

TEST(TlsUrlTest, RedissParsesEveryTlsParameter) {
  const ConnectionOptions o = ConnectionOptions::from_url(
      "rediss://alice:pw@redis.example.com:6380/2?cacert=/etc/ca.pem&cacertdir=/etc/cas"
      "&cert=/c%20d/client.pem&key=/k.pem&sni=cache.example.com&insecure=false");
  EXPECT_TRUE(o.tls.enabled);
  EXPECT_EQ(o.host, "redis.example.com");
  EXPECT_EQ(o.port, 6380);
  EXPECT_EQ(o.db, 2);
  EXPECT_EQ(o.user, "alice");
  EXPECT_EQ(o.password, "pw");
  EXPECT_EQ(o.tls.cacert, "/etc/ca.pem");
  EXPECT_EQ(o.tls.cacertdir, "/etc/cas");
  EXPECT_EQ(o.tls.cert, "/c d/client.pem");
  EXPECT_EQ(o.tls.key, "/k.pem");
  EXPECT_EQ(o.tls.sni, "cache.example.com");
  EXPECT_FALSE(o.tls.insecure);
  EXPECT_TRUE(ConnectionOptions::from_url("rediss://h?insecure=true").tls.insecure);
  EXPECT_TRUE(ConnectionOptions::from_url("REDISS://h?insecure=1").tls.insecure);
}

TEST(TlsUrlTest, RedissWithoutParametersUsesTheSystemTrustStore) {
  const ConnectionOptions o = ConnectionOptions::from_url("rediss://:pw@h");
  EXPECT_TRUE(o.tls.enabled);
  EXPECT_EQ(o.port, 6379);
  EXPECT_TRUE(o.tls.cacert.empty());
  EXPECT_TRUE(o.tls.cacertdir.empty());
  EXPECT_FALSE(o.tls.insecure);
}

TEST(TlsUrlTest, ClusterAndSentinelSchemesCarryTls) {
  const ConnectionOptions seeds = ConnectionOptions::from_url("rediss://a:1,b:2?cacert=/ca");
  EXPECT_TRUE(seeds.cluster);
  EXPECT_TRUE(seeds.tls.enabled);
  EXPECT_EQ(seeds.tls.cacert, "/ca");
  const ConnectionOptions cluster = ConnectionOptions::from_url("rediss-cluster://a:1?sni=n");
  EXPECT_TRUE(cluster.cluster);
  EXPECT_EQ(cluster.tls.sni, "n");
  const ConnectionOptions sentinel =
      ConnectionOptions::from_url("rediss-sentinel://s:26380/mymaster/3?cacert=/ca");
  EXPECT_EQ(sentinel.sentinel_master, "mymaster");
  EXPECT_EQ(sentinel.db, 3);
  EXPECT_TRUE(sentinel.tls.enabled);
  EXPECT_EQ(sentinel.tls.cacert, "/ca");
}

TEST(TlsUrlTest, RedactedUrlKeepsTheTlsSettingsAndHidesThePassword) {
  const ConnectionOptions o = ConnectionOptions::from_url(
      "rediss://u:secret@h:7/1?cacert=/a%26b/ca.pem&sni=n&insecure=true");
  const std::string url = o.redacted_url();
  EXPECT_EQ(url, "rediss://u:***@h:7/1?cacert=/a%26b/ca.pem&sni=n&insecure=true");
  const ConnectionOptions again = ConnectionOptions::from_url(
      "rediss://u:secret@h:7/1?cacert=/a%26b/ca.pem&sni=n&insecure=true");
  EXPECT_EQ(again.tls.cacert, "/a&b/ca.pem");
  EXPECT_EQ(ConnectionOptions::from_url("rediss-sentinel://s:1/m?cacert=/c").redacted_url(),
            "rediss-sentinel://s:1/m?cacert=/c");
  EXPECT_EQ(ConnectionOptions::from_url("rediss://a:1,b:2").redacted_url(),
            "rediss-cluster://a:1,b:2");
}

struct BadTlsUrl {
  std::string url;
  std::string message;  // must appear in what()
};

class BadTlsUrlTest : public ::testing::TestWithParam<BadTlsUrl> {};

TEST_P(BadTlsUrlTest, ThrowsInvalidArgumentNamingTheParameter) {
  const BadTlsUrl& b = GetParam();
  const std::string what = refusal([&] { (void)ConnectionOptions::from_url(b.url); });
  EXPECT_THAT(what, HasSubstr(b.message)) << b.url;
  EXPECT_THAT(what, ::testing::Not(HasSubstr("secret")));
}

INSTANTIATE_TEST_SUITE_P(
    Urls, BadTlsUrlTest,
    ::testing::Values(
        BadTlsUrl{"rediss://:secret@h?cafile=/x",
                  "unknown query parameter 'cafile' (a TLS URL takes cacert, cacertdir, cert, "
                  "key, sni, insecure"},
        BadTlsUrl{"rediss://:secret@h?db=2", "unknown query parameter 'db'"},
        BadTlsUrl{"rediss://h?cacert=", "query parameter 'cacert' needs a value"},
        BadTlsUrl{"rediss://h?cacert", "query parameter 'cacert' needs a value"},
        BadTlsUrl{"rediss://h?cacert=/a&cacert=/b", "query parameter 'cacert' is given twice"},
        BadTlsUrl{"rediss://h?insecure=yes", "'insecure' must be true or false, not 'yes'"},
        BadTlsUrl{"rediss://h?insecure=true&insecure=false", "'insecure' is given twice"},
        BadTlsUrl{"rediss://h?key=%zz", "malformed percent-encoding in query parameter 'key'"},
        BadTlsUrl{"rediss://:secret@h?cert=/c.pem", "tls.cert is set without tls.key"},
        BadTlsUrl{"rediss://h?key=/k.pem", "tls.key is set without tls.cert"},
        BadTlsUrl{"rediss://h?sni=a%20b", "tls.sni contains whitespace"},
        BadTlsUrl{"rediss://h?cacert=/a#frag", "fragment"},
        BadTlsUrl{"rediss://a:1,b:2/1", "Redis Cluster has only database 0"},
        BadTlsUrl{"rediss-sentinel://s:1?cacert=/c", "the master name is missing"}));

TEST(TlsOptionsTest, TlsOverAUnixSocketIsRefused) {
  ConnectionOptions o;
  o.unix_path = "/run/redis.sock";
  o.tls.enabled = true;
  EXPECT_THAT(refusal([&] { o.validate(); }),
              HasSubstr("TLS is for TCP connections; unix_path is set"));
}

#else

TEST(TlsBuild, RedissIsRefusedSayingTlsWasNotBuiltInAndHowToBuildIt) {
  for (const char* url : {"rediss://h", "rediss-cluster://a:1", "rediss-sentinel://s:1/m",
                          "rediss://:secret@h?cacert=/ca.pem"}) {
    const std::string what = refusal([&] { (void)ConnectionOptions::from_url(url); });
    EXPECT_THAT(what, HasSubstr("TLS (rediss://) is not built into this fairsem")) << url;
    EXPECT_THAT(what, HasSubstr("hiredis >= 1.0 with hiredis_ssl and OpenSSL")) << url;
    EXPECT_THAT(what, HasSubstr("-DFAIRSEM_TLS=ON")) << url;
    EXPECT_THAT(what, ::testing::Not(HasSubstr("secret"))) << url;
  }
  ConnectionOptions o;
  o.tls.enabled = true;
  EXPECT_THAT(refusal([&] { o.validate(); }), HasSubstr("is not built into this fairsem"));
}

#endif

}  // namespace
