// Credentials on real local deployments: a wrong password, an unknown user or a missing password
// reaching a Redis Cluster or a Sentinel group is an AuthError, whichever connection meets it
// first (the slot map's question to a seed, the script load, a sentinel's answer, the master's
// handshake), and nothing is written. A deployment of each kind, of its own, started once per
// test binary: the tests change users on every node.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "fairsem/impl/connection.hpp"
#include "node_admin.hpp"
#include "redis_cluster.hpp"
#include "redis_sentinel.hpp"

namespace {

using fairsem::AuthError;
using fairsem::ConnectionOptions;
using fairsem::FairSemaphore;
using fairsem::SemaphoreOptions;
using fairsem::test::admin;
using fairsem::test::RedisCluster;
using fairsem::test::SentinelGroup;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kUser = "app";
constexpr const char* kSecret = "right-pw-5c1d";

/// Gives `user` every permission, with kSecret, on the node on `port`.
template <typename Deployment>
void add_user(const Deployment& deployment, int port, const std::string& user) {
  admin(deployment.node(port),
        {"ACL", "SETUSER", user, "reset", "on", std::string(">") + kSecret, "~*", "&*", "+@all"});
}

/// Keys on every node, summed: what a refused client must not have written.
template <typename Deployment>
long long keys_on(const Deployment& deployment, const std::vector<int>& ports) {
  long long n = 0;
  for (int port : ports) n += admin(deployment.node(port), {"DBSIZE"}).integer;
  return n;
}

/// Opening a semaphore and taking a permit with `o`: throws what the deployment answers.
void use(const ConnectionOptions& o) {
  SemaphoreOptions options;
  options.limit = 1;
  FairSemaphore sem(o, "auth-probe", options);
  EXPECT_TRUE(sem.try_acquire().has_value());
}

/// `use(o)` fails with an AuthError whose message never shows a password.
void expect_auth_error(const ConnectionOptions& o) {
  try {
    use(o);
    ADD_FAILURE() << "no AuthError for " << o.redacted_url();
  } catch (const AuthError& e) {
    EXPECT_THAT(e.what(), Not(HasSubstr(kSecret)));
    if (!o.password.empty()) {
      EXPECT_THAT(e.what(), Not(HasSubstr(o.password)));
    }
  }
}

class ClusterAuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = std::make_unique<RedisCluster>(3, 0);
    for (int port : cluster_->node_ports()) add_user(*cluster_, port, kUser);
  }
  static void TearDownTestSuite() { cluster_.reset(); }

  static ConnectionOptions as(const std::string& user, const std::string& password) {
    ConnectionOptions o = ConnectionOptions::from_url(cluster_->seed_url());
    o.user = user;
    o.password = password;
    return o;
  }
  static long long keys() { return keys_on(*cluster_, cluster_->node_ports()); }

  static std::unique_ptr<RedisCluster> cluster_;
};

std::unique_ptr<RedisCluster> ClusterAuthTest::cluster_;

TEST_F(ClusterAuthTest, AWrongPasswordOrAnUnknownUserIsAnAuthErrorAndWritesNothing) {
  const long long before = keys();
  expect_auth_error(as(kUser, "wrong-pw-77"));
  expect_auth_error(as("nobody", kSecret));
  EXPECT_EQ(keys(), before);
  // The right ones work: the refusals above were the credentials', nothing else.
  use(as(kUser, kSecret));
}

// A node whose default user is off answers an unauthenticated client with NOAUTH, or with
// "unauthenticated multibulk length" to a long first command: both are AuthErrors.
TEST_F(ClusterAuthTest, AMissingPasswordIsAnAuthErrorOnEveryNode) {
  const std::vector<int> ports = cluster_->node_ports();
  for (int port : ports) admin(cluster_->node(port), {"ACL", "SETUSER", "default", "off"});
  // The harness's own connections are the default user's: switch it back on whatever happens.
  struct Restore {
    const std::vector<int>& ports;
    ~Restore() {
      for (int port : ports) {
        ConnectionOptions o = cluster_->node(port).options();
        o.user = kUser;
        o.password = kSecret;
        fairsem::detail::Connection(o).command({"ACL", "SETUSER", "default", "on"});
      }
    }
  } restore{ports};
  expect_auth_error(as("", ""));
}

class SentinelAuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    group_ = std::make_unique<SentinelGroup>();
    for (int port : group_->data_ports()) add_user(*group_, port, kUser);
    for (int port : group_->sentinel_ports()) add_user(*group_, port, kUser);
  }
  static void TearDownTestSuite() { group_.reset(); }

  static ConnectionOptions as(const std::string& user, const std::string& password) {
    ConnectionOptions o = ConnectionOptions::from_url(group_->url());
    o.user = user;
    o.password = password;
    return o;
  }

  static std::unique_ptr<SentinelGroup> group_;
};

std::unique_ptr<SentinelGroup> SentinelAuthTest::group_;

TEST_F(SentinelAuthTest, AWrongPasswordForTheMasterIsAnAuthErrorAndWritesNothing) {
  const long long before = keys_on(*group_, {group_->master_port()});
  expect_auth_error(as(kUser, "wrong-pw-77"));
  expect_auth_error(as("nobody", kSecret));
  EXPECT_EQ(keys_on(*group_, {group_->master_port()}), before);
  use(as(kUser, kSecret));
}

TEST_F(SentinelAuthTest, AWrongPasswordForTheSentinelsIsAnAuthError) {
  ConnectionOptions o = as("", "");
  o.sentinel_user = kUser;
  o.sentinel_password = "wrong-pw-77";
  expect_auth_error(o);
  o.sentinel_password = kSecret;
  use(o);
}

}  // namespace
