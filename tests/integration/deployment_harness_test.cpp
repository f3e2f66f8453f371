// Tests of the deployment harness itself (tests/support/redis_cluster, redis_sentinel): a real
// Redis Cluster and a real Sentinel group form, migrate slots and fail over as the library's
// deployment tests expect. One cluster and one sentinel group per test process; a test may
// find them after an earlier test's failover or migration, so it asks who serves what now.

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "fairsem/errors.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "redis_cluster.hpp"
#include "redis_sentinel.hpp"
#include "test_certs.hpp"

namespace fairsem::test {
namespace {

using Clock = std::chrono::steady_clock;
using detail::Reply;
using ::testing::HasSubstr;

/// `args` on a connection of its own to `node` (over TLS when it speaks TLS). The fixtures'
/// run(port, args) and error_of(port, args) use these with the node on `port`.
Reply run_on(const RedisServer& node, const std::vector<std::string>& args) {
  ConnectionOptions options = node.options();
  options.reconnect_attempts = 1;
  detail::Connection conn(options);
  return conn.command(detail::Args(args.begin(), args.end()));
}

/// The first line of `node`'s error reply to `args` ("" when it succeeds).
std::string error_on(const RedisServer& node, const std::vector<std::string>& args) {
  try {
    run_on(node, args);
  } catch (const ReplyError& e) {
    return e.server_message();
  }
  return "";
}

/// With FAIRSEM_TEST_TLS=1 a data node has no plaintext port, and replicates and gossips (cluster
/// bus, MIGRATE) over TLS; without it, it has only the plaintext port.
void expect_tls_as_requested(const RedisServer& node) {
  const auto config = [&](const std::string& name) {
    const Reply reply = run_on(node, {"CONFIG", "GET", name});
    return reply.elements.size() == 2 ? reply.elements[1].str : "(no " + name + ")";
  };
  const std::string port = std::to_string(node.port());
  if (!tls_requested()) {
    EXPECT_EQ(config("port"), port);
    return;
  }
  EXPECT_EQ(config("port"), "0") << port;
  EXPECT_EQ(config("tls-port"), port);
  EXPECT_EQ(config("tls-replication"), "yes") << port;
  EXPECT_EQ(config("tls-cluster"), "yes") << port;
}

long long ms_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

/// Timings go to stdout, where ctest --verbose and the test log show them.
void report(const char* what, long long ms) { std::printf("[ timing   ] %s: %lld ms\n", what, ms); }

class ClusterHarnessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto start = Clock::now();
    try {
      cluster_ = std::make_unique<RedisCluster>(3, 1);
    } catch (const std::exception& e) {
      setup_error_ = e.what();
      return;
    }
    report("forming a 3-master, 3-replica cluster", ms_since(start));
  }
  static void TearDownTestSuite() { cluster_.reset(); }

  void SetUp() override {
    if (!cluster_) GTEST_FAIL() << "the cluster did not start:\n" << setup_error_;
  }

  static RedisCluster& cluster() { return *cluster_; }
  static Reply run(int port, const std::vector<std::string>& args) {
    return run_on(cluster().node(port), args);
  }
  static std::string error_of(int port, const std::vector<std::string>& args) {
    return error_on(cluster().node(port), args);
  }

  static std::unique_ptr<RedisCluster> cluster_;
  static std::string setup_error_;
};

std::unique_ptr<RedisCluster> ClusterHarnessTest::cluster_;
std::string ClusterHarnessTest::setup_error_;

TEST_F(ClusterHarnessTest, FormsWithThreeMastersEachWithAReplica) {
  const std::vector<int> masters = cluster().master_ports();
  ASSERT_EQ(masters.size(), 3u) << cluster().logs();
  const std::vector<int> nodes = cluster().node_ports();
  EXPECT_EQ(nodes.size(), 6u);
  std::vector<int> replicas;
  for (int master : masters) {
    const int replica = cluster().replica_port_of(master);
    EXPECT_NE(replica, master);
    replicas.push_back(replica);
    const Reply role = run(replica, {"ROLE"});
    ASSERT_GE(role.elements.size(), 4u);
    EXPECT_EQ(role.elements[0].str, "slave");
    EXPECT_EQ(role.elements[2].integer, master);
    EXPECT_EQ(role.elements[3].str, "connected");
    EXPECT_EQ(run(master, {"ROLE"}).elements[0].str, "master");
  }
  std::sort(replicas.begin(), replicas.end());
  EXPECT_EQ(std::unique(replicas.begin(), replicas.end()), replicas.end()) << "a shared replica";
  for (int port : nodes) {
    const std::string info = run(port, {"CLUSTER", "INFO"}).str;
    EXPECT_NE(info.find("cluster_state:ok\r\n"), std::string::npos) << port << ":\n" << info;
    EXPECT_NE(info.find("cluster_known_nodes:6\r\n"), std::string::npos) << info;
    EXPECT_NE(info.find("cluster_size:3\r\n"), std::string::npos) << info;
    EXPECT_FALSE(cluster().node_id(port).empty());
    expect_tls_as_requested(cluster().node(port));
  }
  // The seed list is the masters as created: three loopback addresses of cluster nodes, reached
  // over TLS when the nodes speak it.
  const std::string seeds = cluster().seed_url();
  const ConnectionOptions parsed = ConnectionOptions::from_url(seeds);
  EXPECT_TRUE(parsed.cluster) << seeds;
  EXPECT_EQ(parsed.tls.enabled, tls_requested()) << seeds;
  std::vector<NodeAddress> listed = {{parsed.host, parsed.port}};
  listed.insert(listed.end(), parsed.seeds.begin(), parsed.seeds.end());
  EXPECT_EQ(listed.size(), 3u) << seeds;
  for (const NodeAddress& seed : listed) {
    EXPECT_EQ(seed.host, "127.0.0.1") << seeds;
    EXPECT_NE(std::find(nodes.begin(), nodes.end(), seed.port), nodes.end()) << seeds;
  }
  // The masters split the slots: the owner of slot 0 is the first of master_ports().
  EXPECT_EQ(cluster().master_port_for_slot(0), masters.front());
  EXPECT_EQ(cluster().master_port_for_slot(RedisCluster::kSlots - 1), masters.back());
}

TEST_F(ClusterHarnessTest, KeySlotMatchesClusterKeyslot) {
  const int node = cluster().node_ports().front();
  const std::vector<std::string> keys = {"",
                                         "foo",
                                         "123456789",
                                         "{user1000}.following",
                                         "{user1000}.followers",
                                         "foo{}{bar}",
                                         "foo{{bar}}zap",
                                         "foo{bar}{zap}",
                                         "{",
                                         "}{",
                                         "a{b",
                                         "fairsem:{jobs}:queue",
                                         std::string("bin\0\xff{\x80}", 8)};
  for (const std::string& key : keys) {
    EXPECT_EQ(RedisCluster::key_slot(key), run(node, {"CLUSTER", "KEYSLOT", key}).integer)
        << "key '" << key << "'";
  }
  // Known values: CRC16("123456789") = 0x31C3; the tag rules from the cluster specification.
  EXPECT_EQ(RedisCluster::key_slot("123456789"), 0x31C3);
  EXPECT_EQ(RedisCluster::key_slot("foo"), 12182);
  EXPECT_EQ(RedisCluster::key_slot("{user1000}.following"), RedisCluster::key_slot("user1000"));
  EXPECT_EQ(RedisCluster::key_slot("foo{{bar}}zap"), RedisCluster::key_slot("{bar"));
  EXPECT_EQ(RedisCluster::key_slot("foo{bar}{zap}"), RedisCluster::key_slot("bar"));
}

TEST_F(ClusterHarnessTest, MigrateSlotMovesKeysWithTheirTtls) {
  const std::string tag = "{harness-migration}";
  const int slot = RedisCluster::key_slot(tag);
  const int source = cluster().master_port_for_slot(slot);
  int target = 0;
  for (int port : cluster().master_ports()) {
    if (port != source) target = port;
  }
  ASSERT_NE(target, 0);
  // Slot-local keys on the source, every other one with a TTL.
  const int kKeys = 25;
  for (int i = 0; i < kKeys; ++i) {
    const std::string key = tag + std::to_string(i);
    run(source, {"SET", key, fmt::format("v{}", i)});
    if (i % 2 == 0) run(source, {"PEXPIRE", key, "600000"});
  }

  const auto start = Clock::now();
  cluster().begin_migration(slot, target);
  EXPECT_TRUE(cluster().migrating());
  EXPECT_EQ(cluster().migrate_keys(10), 10u);
  // Mid-migration: a moved key is answered with ASK on the source and served on the target
  // after ASKING; a key not moved yet is still on the source.
  int moved = -1;
  int kept = -1;
  for (int i = 0; i < kKeys; ++i) {
    const std::string key = tag + std::to_string(i);
    const std::string error = error_of(source, {"GET", key});
    if (error.empty()) {
      kept = i;
    } else {
      EXPECT_EQ(error.rfind(fmt::format("ASK {} 127.0.0.1:{}", slot, target), 0), 0u) << error;
      moved = i;
    }
  }
  ASSERT_GE(moved, 0);
  ASSERT_GE(kept, 0);
  {
    detail::Connection conn(cluster().node(target).options());
    conn.command({"ASKING"});
    EXPECT_EQ(conn.command({"GET", tag + std::to_string(moved)}).str, fmt::format("v{}", moved));
  }
  cluster().finish_migration();
  report("migrating a slot with 25 keys", ms_since(start));
  EXPECT_FALSE(cluster().migrating());

  EXPECT_EQ(cluster().master_port_for_slot(slot), target);
  for (int port : cluster().node_ports()) {
    EXPECT_EQ(cluster().master_port_for_slot(slot), target) << "as seen from " << port;
  }
  EXPECT_EQ(run(source, {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}).integer, 0);
  EXPECT_EQ(run(target, {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}).integer, kKeys);
  for (int i = 0; i < kKeys; ++i) {
    const std::string key = tag + std::to_string(i);
    EXPECT_EQ(run(target, {"GET", key}).str, fmt::format("v{}", i));
    const long long ttl = run(target, {"PTTL", key}).integer;
    if (i % 2 == 0) {
      EXPECT_GT(ttl, 500000) << key;
    } else {
      EXPECT_EQ(ttl, -1) << key;
    }
    EXPECT_EQ(error_of(source, {"GET", key}), fmt::format("MOVED {} 127.0.0.1:{}", slot, target));
  }
  // And back in one call; nothing is left behind.
  cluster().migrate_slot(slot, source);
  EXPECT_EQ(cluster().master_port_for_slot(slot), source);
  EXPECT_EQ(run(source, {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}).integer, kKeys);
  for (int i = 0; i < kKeys; ++i) run(source, {"DEL", tag + std::to_string(i)});
}

TEST_F(ClusterHarnessTest, MigrationRefusesAWrongTarget) {
  const int slot = 100;
  const int owner = cluster().master_port_for_slot(slot);
  EXPECT_THROW(cluster().begin_migration(slot, owner), std::invalid_argument);
  EXPECT_THROW(cluster().migrate_keys(1), std::logic_error);
  EXPECT_THROW(cluster().finish_migration(), std::logic_error);
  EXPECT_FALSE(cluster().migrating());
}

TEST_F(ClusterHarnessTest, FailoverPromotesTheReplicaAndBack) {
  const int master = cluster().master_ports().front();
  const int replica = cluster().replica_port_of(master);
  const std::string key = "{harness-failover}";
  const int owner = cluster().master_port_for_slot(RedisCluster::key_slot(key));
  run(owner, {"SET", key, "before"});

  auto start = Clock::now();
  EXPECT_EQ(cluster().failover(master), replica);
  report("cluster failover", ms_since(start));
  std::vector<int> masters = cluster().master_ports();
  EXPECT_NE(std::find(masters.begin(), masters.end(), replica), masters.end());
  EXPECT_EQ(std::find(masters.begin(), masters.end(), master), masters.end());
  EXPECT_EQ(cluster().replica_port_of(replica), master);
  EXPECT_EQ(run(master, {"ROLE"}).elements[0].str, "slave");
  EXPECT_EQ(error_of(master, {"SET", "{x}", "1"}).rfind("MOVED", 0), 0u);

  // Back again, at once.
  start = Clock::now();
  EXPECT_EQ(cluster().failover(replica), master);
  report("cluster failover back", ms_since(start));
  masters = cluster().master_ports();
  EXPECT_NE(std::find(masters.begin(), masters.end(), master), masters.end());
  EXPECT_EQ(cluster().replica_port_of(master), replica);
  // The data went along (replicated before each failover: a manual failover waits for it).
  EXPECT_EQ(run(cluster().master_port_for_slot(RedisCluster::key_slot(key)), {"GET", key}).str,
            "before");
}

class SentinelHarnessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto start = Clock::now();
    try {
      group_ = std::make_unique<SentinelGroup>();
    } catch (const std::exception& e) {
      setup_error_ = e.what();
      return;
    }
    report("forming a sentinel group", ms_since(start));
  }
  static void TearDownTestSuite() { group_.reset(); }

  void SetUp() override {
    if (!group_) GTEST_FAIL() << "the sentinel group did not start:\n" << setup_error_;
  }

  static SentinelGroup& group() { return *group_; }
  static Reply run(int port, const std::vector<std::string>& args) {
    return run_on(group().node(port), args);
  }
  static std::string error_of(int port, const std::vector<std::string>& args) {
    return error_on(group().node(port), args);
  }

  static std::unique_ptr<SentinelGroup> group_;
  static std::string setup_error_;
};

std::unique_ptr<SentinelGroup> SentinelHarnessTest::group_;
std::string SentinelHarnessTest::setup_error_;

TEST_F(SentinelHarnessTest, FormsWithMasterReplicaAndThreeSentinels) {
  const std::vector<int> sentinels = group().sentinel_ports();
  ASSERT_EQ(sentinels.size(), 3u);
  const std::string url = group().url();
  EXPECT_EQ(url.rfind(fmt::format("{}://127.0.0.1:{},127.0.0.1:{},127.0.0.1:{}/mymaster",
                                  tls_requested() ? "rediss-sentinel" : "redis-sentinel",
                                  sentinels[0], sentinels[1], sentinels[2]),
                      0),
            0u)
      << url;
  EXPECT_EQ(ConnectionOptions::from_url(url).tls.enabled, tls_requested()) << url;
  const int master = group().master_port();
  const int replica = group().replica_port();
  EXPECT_NE(master, replica);
  EXPECT_EQ(run(master, {"ROLE"}).elements[0].str, "master");
  const Reply role = run(replica, {"ROLE"});
  ASSERT_GE(role.elements.size(), 4u);
  EXPECT_EQ(role.elements[0].str, "slave");
  EXPECT_EQ(role.elements[2].integer, master);
  EXPECT_EQ(role.elements[3].str, "connected");
  for (int port : group().data_ports()) expect_tls_as_requested(group().node(port));
  for (int sentinel : sentinels) {
    EXPECT_EQ(run(sentinel, {"ROLE"}).elements[0].str, "sentinel");
    const Reply addr = run(sentinel, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"});
    ASSERT_EQ(addr.elements.size(), 2u);
    EXPECT_EQ(addr.elements[0].str, "127.0.0.1");
    EXPECT_EQ(addr.elements[1].str, std::to_string(master));
    EXPECT_EQ(run(sentinel, {"SENTINEL", "SENTINELS", "mymaster"}).elements.size(), 2u);
    EXPECT_EQ(run(sentinel, {"SENTINEL", "REPLICAS", "mymaster"}).elements.size(), 1u);
    EXPECT_EQ(run(sentinel, {"SENTINEL", "CKQUORUM", "mymaster"}).str.rfind("OK", 0), 0u);
    // A sentinel rewrites its config file with what it learns, and a restart reads it: the TLS
    // settings must be in it (sentinels have no CONFIG GET to ask instead).
    if (tls_requested()) {
      std::ifstream in(group().node(sentinel).config_path());
      const std::string config((std::istreambuf_iterator<char>(in)), {});
      EXPECT_THAT(config, HasSubstr("\nport 0\n"));
      EXPECT_THAT(config, HasSubstr(fmt::format("\ntls-port {}\n", sentinel)));
      EXPECT_THAT(config, HasSubstr("\ntls-replication yes\n"));
    }
  }
}

TEST_F(SentinelHarnessTest, FailoverSwitchesTheMasterAndBack) {
  const int first = group().master_port();
  const int second = group().replica_port();
  // No WAIT: failover() itself waits for the replica to have every write made before it.
  run(first, {"SET", "harness-sentinel", "kept"});

  auto start = Clock::now();
  EXPECT_EQ(group().failover(), second);
  report("sentinel failover", ms_since(start));
  EXPECT_EQ(group().master_port(), second);
  EXPECT_EQ(group().replica_port(), first);
  EXPECT_EQ(run(second, {"ROLE"}).elements[0].str, "master");
  EXPECT_EQ(run(first, {"ROLE"}).elements[0].str, "slave");
  EXPECT_EQ(run(second, {"GET", "harness-sentinel"}).str, "kept") << group().logs();
  EXPECT_EQ(error_of(first, {"SET", "x", "1"}).rfind("READONLY", 0), 0u);

  start = Clock::now();
  EXPECT_EQ(group().failover(), first);
  report("sentinel failover back", ms_since(start));
  EXPECT_EQ(group().master_port(), first);
  EXPECT_EQ(run(first, {"GET", "harness-sentinel"}).str, "kept");
  run(first, {"DEL", "harness-sentinel"});
}

// A server stopped for a restart keeps its port: no other test's server (ctest runs several at
// once) can take it meanwhile, where this test's clients would then land, yet a client is
// refused as by a dead server; start() gets it back.
TEST(RedisServerHarnessTest, AStoppedServerKeepsItsPortUntilItStartsAgain) {
  RedisServer server;
  const int port = server.port();
  ASSERT_FALSE(loopback_port_free(port));
  server.kill();
  EXPECT_FALSE(loopback_port_free(port)) << "another server could take the port now";
  ConnectionOptions refused = server.options();
  refused.reconnect_attempts = 1;
  EXPECT_THROW(detail::Connection{refused}, ConnectionError);
  server.start();
  EXPECT_EQ(run_on(server, {"PING"}).str, "PONG");
  server.stop();
  EXPECT_FALSE(loopback_port_free(port));
  server.start();
  EXPECT_EQ(run_on(server, {"PING"}).str, "PONG");
}

}  // namespace
}  // namespace fairsem::test
