// A Client on real local deployments, each of its own, started once per test binary (the tests
// change users on every node):
// - credentials: a wrong password, an unknown user or a missing password reaching a Redis
//   Cluster or a Sentinel group is an AuthError, whichever connection meets it first (the slot
//   map's question to a seed, a sentinel's answer, the master's handshake), and nothing is
//   written;
// - resources: through Sentinel, a Client's threads and connections follow the one master, not
//   the number of semaphore names; on a Cluster, renewals use one connection per master, and
//   the threads and connections of the slots waited on close once idle;
// - SemaphoreAdmin::list reads every master: each semaphore listed once, with the node that
//   stores it and what it holds and queues; function_libraries and prune_function_libraries
//   too.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "node_admin.hpp"
#include "process_stats.hpp"
#include "redis_cluster.hpp"
#include "redis_sentinel.hpp"
#include "wait.hpp"

namespace {

using fairsem::AuthError;
using fairsem::Client;
using fairsem::ClientOptions;
using fairsem::ConnectionOptions;
using fairsem::FairSemaphore;
using fairsem::FunctionLibrary;
using fairsem::Permit;
using fairsem::SemaphoreAdmin;
using fairsem::SemaphoreListing;
using fairsem::SemaphoreOptions;
using fairsem::test::admin;
using fairsem::test::RedisCluster;
using fairsem::test::SentinelGroup;
using fairsem::test::thread_count;
using fairsem::test::wait_until;
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

/// Client connections on the node on `port`, the one asking not counted.
template <typename Deployment>
long long connections_on(const Deployment& deployment, int port) {
  const std::string clients = admin(deployment.node(port), {"CLIENT", "LIST"}).str;
  return static_cast<long long>(std::count(clients.begin(), clients.end(), '\n')) - 1;
}

/// Client connections on every master of `cluster` now, summed (connections_on).
long long connections_on_masters(const RedisCluster& cluster) {
  long long n = 0;
  for (int port : cluster.master_ports()) n += connections_on(cluster, port);
  return n;
}

/// `count` semaphores of limit 1 opened through one Client, each held, with one waiter queued
/// behind its holder (an asynchronous acquire).
struct NamesWithAWaiter {
  std::vector<std::unique_ptr<FairSemaphore>> semaphores;
  std::vector<Permit> holders;
  std::vector<std::future<Permit>> waiters;

  NamesWithAWaiter(Client& client, const std::string& prefix, int count,
                   const SemaphoreOptions& options) {
    for (int i = 0; i < count; ++i) {
      semaphores.push_back(
          std::make_unique<FairSemaphore>(client, prefix + std::to_string(i), options));
      holders.push_back(semaphores.back()->acquire());
      waiters.push_back(semaphores.back()->acquire_async());
    }
  }
  /// Every waiter is in Redis.
  bool queued() {
    return wait_until([&] {
      for (auto& sem : semaphores) {
        if (sem->status().waiters.size() != 1) return false;
      }
      return true;
    });
  }
  /// The holders release; every waiter is granted, and releases.
  void serve_all() {
    holders.clear();
    for (auto& waiter : waiters) {
      ASSERT_EQ(waiter.wait_for(std::chrono::seconds(30)), std::future_status::ready);
      Permit p = waiter.get();
      EXPECT_EQ(p.release(), fairsem::ReleaseResult::released);
    }
  }
};

/// Lists the `count` semaphores of `names` (prefix "listing", names `stem`0...) through `client`
/// and checks each: listed once, in name order, held with one waiter, on the node whose port
/// `stores` says holds its keys. Returns the nodes seen.
template <typename Stores>
std::set<std::string> check_listing(const Client& client, const std::string& stem, int count,
                                    Stores stores) {
  std::vector<std::string> expected;
  for (int i = 0; i < count; ++i) expected.push_back(stem + std::to_string(i));
  std::sort(expected.begin(), expected.end());
  const std::vector<SemaphoreListing> found = SemaphoreAdmin::list(client, "listing");
  std::set<std::string> nodes;
  EXPECT_EQ(expected.size(), found.size());
  for (std::size_t i = 0; i < std::min(expected.size(), found.size()); ++i) {
    const SemaphoreListing& l = found[i];
    EXPECT_EQ(expected[i], l.name);
    EXPECT_EQ(1u, l.status.holders.size()) << l.name;
    EXPECT_EQ(1u, l.status.waiters.size()) << l.name;
    const int port = std::stoi(l.node.substr(l.node.rfind(':') + 1));
    EXPECT_TRUE(stores(port, "listing:{" + l.name + "}:meta")) << l.name << " on " << l.node;
    nodes.insert(l.node);
  }
  return nodes;
}

class ClusterClientTest : public ::testing::Test {
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

std::unique_ptr<RedisCluster> ClusterClientTest::cluster_;

TEST_F(ClusterClientTest, AWrongPasswordOrAnUnknownUserIsAnAuthErrorAndWritesNothing) {
  const long long before = keys();
  expect_auth_error(as(kUser, "wrong-pw-77"));
  expect_auth_error(as("nobody", kSecret));
  EXPECT_EQ(keys(), before);
  // The right ones work: the refusals above were the credentials', nothing else.
  use(as(kUser, kSecret));
}

// A node whose default user is off answers an unauthenticated client with NOAUTH, or with
// "unauthenticated multibulk length" to a long first command: both are AuthErrors.
TEST_F(ClusterClientTest, AMissingPasswordIsAnAuthErrorOnEveryNode) {
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

// A Cluster Client's wake-ups follow nodes: one thread per master waits for the wake-ups of
// every slot of that master, through a connection per slot waited on (a script can push a
// wake-up only to a key of its own slot, and one BRPOP takes keys of one slot). A service with
// a semaphore per tenant keeps no thread per name (they were once +53 for 50 names), and once
// nothing waits or is held, the slots' connections close and so do the threads.
TEST_F(ClusterClientTest, WaitingOnFiftyNamesLeavesNoThreadOrConnectionBehindOnceIdle) {
  ClientOptions client_options;
  client_options.max_connections = 4;
  client_options.worker_threads = 2;
  client_options.idle_timeout = std::chrono::milliseconds(500);
  Client client(as(kUser, kSecret), client_options);
  const std::vector<int> masters = cluster_->master_ports();
  const auto connections = [&] { return connections_on_masters(*cluster_); };
  const std::size_t threads_before = thread_count();
  const long long connections_before = connections();

  SemaphoreOptions options;
  options.limit = 1;
  options.lease = std::chrono::milliseconds(1500);
  NamesWithAWaiter names(client, "tenant-", 50, options);
  ASSERT_TRUE(names.queued());
  // Each holder renewed once.
  ASSERT_TRUE(wait_until([&] {
    for (auto& sem : names.semaphores) {
      if (sem->metrics().renewals == 0) return false;
    }
    return true;
  }));
  std::cout << "while 50 names wait: +" << thread_count() - threads_before << " threads, +"
            << connections() - connections_before << " connections\n";
  // The worker threads, a waker and a renewal lane per master, the callback thread.
  const std::size_t threads_waiting = client_options.worker_threads + 2 * masters.size() + 1;
  EXPECT_LE(thread_count() - threads_before, threads_waiting)
      << "threads follow the names waited on, not the masters";

  names.serve_all();
  if (HasFatalFailure()) return;
  // The semaphores stay open, idle: left are the worker threads, a renewal lane per master and
  // the callback thread, and the pool's connections.
  const std::size_t threads_left = client_options.worker_threads + masters.size() + 1;
  EXPECT_TRUE(wait_until([&] { return thread_count() <= threads_before + threads_left; }))
      << "+" << thread_count() - threads_before << " threads, " << threads_left << " expected";
  EXPECT_TRUE(wait_until([&] {
    return connections() <=
           connections_before + static_cast<long long>(client_options.max_connections);
  })) << "+"
      << connections() - connections_before << " connections, at most "
      << client_options.max_connections << " expected";
}

// Renewals follow nodes, not names: 50 semaphores held through one Client on a 3-master
// cluster are renewed over one connection per master (each lane's connection serves every slot
// of its node), beside the pool's.
TEST_F(ClusterClientTest, FiftyNamesHeldAreRenewedOverOneConnectionPerMaster) {
  ClientOptions client_options;
  client_options.max_connections = 4;
  Client client(as(kUser, kSecret), client_options);
  const std::vector<int> masters = cluster_->master_ports();
  const auto connections = [&] { return connections_on_masters(*cluster_); };
  const long long connections_before = connections();
  SemaphoreOptions options;
  options.limit = 1;
  options.lease = std::chrono::milliseconds(1500);
  std::vector<std::unique_ptr<FairSemaphore>> semaphores;
  std::vector<Permit> held;
  for (int i = 0; i < 50; ++i) {
    semaphores.push_back(
        std::make_unique<FairSemaphore>(client, "renewed-" + std::to_string(i), options));
    held.push_back(semaphores.back()->acquire());
  }
  // Every holder renewed twice: the lanes have made whatever connections they keep.
  ASSERT_TRUE(wait_until([&] {
    for (auto& sem : semaphores) {
      if (sem->metrics().renewals < 2) return false;
    }
    return true;
  }));
  const long long most = client_options.max_connections + static_cast<long long>(masters.size());
  EXPECT_LE(connections() - connections_before, most)
      << "50 names held: +" << connections() - connections_before << " connections";
  for (Permit& p : held) {
    EXPECT_FALSE(p.lost());
    EXPECT_EQ(p.release(), fairsem::ReleaseResult::released);
  }
}

TEST_F(ClusterClientTest, ListReadsEveryMasterAndNamesWhereEachSemaphoreIs) {
  Client client(as("", ""));
  SemaphoreOptions options;
  options.limit = 1;
  options.key_prefix = "listing";
  NamesWithAWaiter names(client, "listed-", 12, options);
  ASSERT_TRUE(names.queued());
  const std::set<std::string> nodes =
      check_listing(client, "listed-", 12, [](int port, const std::string& key) {
        return admin(cluster_->node(port), {"EXISTS", key}).integer == 1;
      });
  EXPECT_EQ(3u, nodes.size());  // the 12 names hash to slots on each of the 3 masters
  names.serve_all();
}

TEST_F(ClusterClientTest, FunctionLibrariesAreListedAndPrunedOnEveryMaster) {
  Client client(as("", ""));
  SemaphoreOptions options;
  options.limit = 1;
  options.key_prefix = "libraries";
  {
    // The names of the listing test, which hash to each of the 3 masters: each loads this
    // version's library there (where the servers have functions).
    NamesWithAWaiter names(client, "listed-", 12, options);
    ASSERT_TRUE(names.queued());
    names.serve_all();
  }
  const std::vector<int> ports = cluster_->node_ports();
  const fairsem::detail::Reply fcall =
      admin(cluster_->node(ports[0]), {"COMMAND", "INFO", "FCALL"});
  if (fcall.elements.empty() || fcall.elements[0].type != fairsem::detail::Reply::Type::array) {
    // Redis 6.2: no functions, nothing to list or prune.
    EXPECT_TRUE(SemaphoreAdmin::function_libraries(client).empty());
    EXPECT_TRUE(SemaphoreAdmin::prune_function_libraries(client).empty());
    return;
  }
  const std::string old_library = "fairsem_00000000aaaa";
  admin(cluster_->node(ports[1]), {"FUNCTION", "LOAD",
                                   "#!lua name=" + old_library + "\nredis.register_function('" +
                                       old_library + "_f', function() return 1 end)"});
  const auto port_of = [](const FunctionLibrary& l) {
    return std::stoi(l.node.substr(l.node.rfind(':') + 1));
  };
  std::set<int> current_on;
  std::vector<int> old_on;
  for (const FunctionLibrary& l : SemaphoreAdmin::function_libraries(client)) {
    if (l.current) current_on.insert(port_of(l));
    if (l.name == old_library) old_on.push_back(port_of(l));
  }
  EXPECT_EQ(std::set<int>(ports.begin(), ports.end()), current_on);
  EXPECT_EQ(std::vector<int>{ports[1]}, old_on);

  const std::vector<FunctionLibrary> pruned = SemaphoreAdmin::prune_function_libraries(client);
  ASSERT_EQ(1u, pruned.size());
  EXPECT_EQ(old_library, pruned[0].name);
  EXPECT_EQ(ports[1], port_of(pruned[0]));
  const std::vector<FunctionLibrary> after = SemaphoreAdmin::function_libraries(client);
  EXPECT_EQ(3u, after.size());
  for (const FunctionLibrary& l : after) EXPECT_TRUE(l.current) << l.name << " on " << l.node;
}

class SentinelClientTest : public ::testing::Test {
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

std::unique_ptr<SentinelGroup> SentinelClientTest::group_;

// Each semaphore name hashes to its own cluster slot, but a Sentinel group has one master for
// all of them: the semaphores of a Client share its wake-up path, watchdog and connection pool
// as on a single server. (They were once per slot, as on a cluster: +53 threads and +66
// connections for 50 names.)
TEST_F(SentinelClientTest, FiftySemaphoreNamesShareTheClientsThreadsAndConnections) {
  ClientOptions client_options;
  client_options.max_connections = 4;
  client_options.worker_threads = 2;
  Client client(as("", ""), client_options);
  const int master = group_->master_port();
  const std::size_t threads_before = thread_count();
  const long long connections_before = connections_on(*group_, master);

  fairsem::SemaphoreOptions options;
  options.limit = 1;
  NamesWithAWaiter names(client, "per-name-", 50, options);
  ASSERT_TRUE(names.queued());
  // The worker threads, one waker and one watchdog; the pool, the waker's and the watchdog's
  // connections.
  EXPECT_LE(thread_count() - threads_before, client_options.worker_threads + 2);
  EXPECT_LE(connections_on(*group_, master) - connections_before,
            static_cast<long long>(client_options.max_connections) + 2);

  // And every waiter is served.
  names.serve_all();
}

TEST_F(SentinelClientTest, ListReadsTheMasterTheSentinelsName) {
  Client client(as("", ""));
  SemaphoreOptions options;
  options.limit = 1;
  options.key_prefix = "listing";
  NamesWithAWaiter names(client, "listed-", 5, options);
  ASSERT_TRUE(names.queued());
  const int master = group_->master_port();
  const std::set<std::string> nodes = check_listing(
      client, "listed-", 5, [&](int port, const std::string&) { return port == master; });
  EXPECT_EQ(1u, nodes.size());
  names.serve_all();
}

TEST_F(SentinelClientTest, AWrongPasswordForTheMasterIsAnAuthErrorAndWritesNothing) {
  const long long before = keys_on(*group_, {group_->master_port()});
  expect_auth_error(as(kUser, "wrong-pw-77"));
  expect_auth_error(as("nobody", kSecret));
  EXPECT_EQ(keys_on(*group_, {group_->master_port()}), before);
  use(as(kUser, kSecret));
}

TEST_F(SentinelClientTest, AWrongPasswordForTheSentinelsIsAnAuthError) {
  ConnectionOptions o = as("", "");
  o.sentinel_user = kUser;
  o.sentinel_password = "wrong-pw-77";
  expect_auth_error(o);
  o.sentinel_password = kSecret;
  use(o);
}

}  // namespace
