// fairsem on real local deployments: a 3-master + 3-replica Redis Cluster and a master +
// replica under three sentinels, each started once per test binary. Tests ask the deployment
// who is master now, since earlier tests fail over.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fairsem/fairsem.hpp>
#include <fairsem/impl/net/connection.hpp>
#include <fairsem/impl/net/router.hpp>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "queued_waiters.hpp"
#include "redis_cluster.hpp"
#include "redis_sentinel.hpp"
#include "script_command.hpp"
#include "stopped.hpp"
#include "wait.hpp"

namespace {

using fairsem::ConnectionOptions;
using fairsem::FairSemaphore;
using fairsem::Permit;
using fairsem::SemaphoreOptions;
using fairsem::detail::Connection;
using fairsem::test::RedisCluster;
using fairsem::test::RedisServer;
using fairsem::test::SentinelGroup;
using fairsem::test::wait_until;
using std::chrono::milliseconds;
using ::testing::HasSubstr;

/// Patient options for a deployment that fails over: a failover takes a few seconds, and
/// every operation must ride it out instead of giving up after the default ~1 s of retries.
ConnectionOptions patient(ConnectionOptions o) {
  o.connect_timeout = milliseconds(500);
  o.command_timeout = milliseconds(2000);
  o.reconnect_attempts = 30;
  o.reconnect_backoff_min = milliseconds(20);
  o.reconnect_backoff_max = milliseconds(300);
  return o;
}

/// A connection to one node (over TLS when it speaks TLS), to look at what fairsem wrote there.
/// The fixtures' node_connection(port) opens one to their deployment's node on `port`.
Connection node_connection(const RedisServer& node) { return Connection(node.options()); }

std::string counter_key(const std::string& name) { return "fairsem:{" + name + "}:counter"; }

long long errorstat(Connection conn, const std::string& code) {
  const std::string info = conn.command({"INFO", "errorstats"}).str;
  const std::string field = "errorstat_" + code + ":count=";
  const std::size_t at = info.find(field);
  return at == std::string::npos ? 0 : std::stoll(info.substr(at + field.size()));
}

/// Holders counted between acquire returning and release being called: a subset of the time
/// each permit is really held, so the count can only under-state an overlap, never invent one.
struct Occupancy {
  std::atomic<int> now{0};
  std::atomic<int> max{0};
  void enter() {
    const int n = ++now;
    int seen = max.load();
    while (n > seen && !max.compare_exchange_weak(seen, n)) {
    }
  }
  void leave() { --now; }
};

/// A second client, on a thread with a FairSemaphore of its own, waiting up to 60 s for a
/// permit. Joined by join() or, should an assertion end the test first, by the destructor.
struct Waiter {
  Waiter(ConnectionOptions connection, std::string name, SemaphoreOptions options)
      : thread([this, connection, name, options] {
          try {
            FairSemaphore sem(connection, name, options);
            permit = sem.try_acquire_for(std::chrono::seconds(60));
          } catch (const std::exception& e) {
            error = e.what();
          }
        }) {}
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;
  ~Waiter() { join(); }
  void join() {
    if (thread.joinable()) thread.join();
  }

  std::optional<Permit> permit;
  std::string error;
  std::thread thread;  // last: starts once the members it writes exist
};

class ClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = std::make_unique<RedisCluster>(3, 1); }
  static void TearDownTestSuite() { cluster_.reset(); }
  static RedisCluster& cluster() { return *cluster_; }
  static Connection node_connection(int port) { return ::node_connection(cluster().node(port)); }
  static long long errorstat(int port, const std::string& code) {
    return ::errorstat(node_connection(port), code);
  }

  /// Options reaching the whole cluster through one seed node (with the nodes' TLS settings).
  static ConnectionOptions one_seed() {
    ConnectionOptions o = cluster().node(cluster().master_ports().front()).options();
    o.cluster = true;
    return patient(o);
  }

  /// A name (unique to this test) whose slot a given master serves now.
  static std::string name_on(int master_port, const std::string& stem) {
    for (int i = 0;; ++i) {
      std::string name = stem + "-" + std::to_string(i);
      if (cluster().master_port_for_slot(RedisCluster::semaphore_slot(name)) == master_port)
        return name;
    }
  }

  static std::unique_ptr<RedisCluster> cluster_;
};

std::unique_ptr<RedisCluster> ClusterTest::cluster_;

TEST_F(ClusterTest, SemaphoresOnEveryMasterWorkThroughOneSeed) {
  const std::vector<int> masters = cluster().master_ports();
  ASSERT_EQ(masters.size(), 3U) << cluster().logs();
  for (const int master : masters) {
    SCOPED_TRACE("master " + std::to_string(master));
    const std::string name = name_on(master, "every-master");
    SemaphoreOptions o;
    o.limit = 2;
    FairSemaphore sem(one_seed(), name, o);
    Permit a = sem.acquire();
    Permit b = sem.acquire();
    EXPECT_FALSE(sem.try_acquire());
    EXPECT_LT(a.fencing_token(), b.fencing_token());
    // A waiter blocks (BRPOP on its wake list, in the semaphore's slot) until a release.
    Waiter waiter(one_seed(), name, o);
    ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
    EXPECT_EQ(a.release(), fairsem::ReleaseResult::released);
    waiter.join();
    EXPECT_EQ(waiter.error, "");
    ASSERT_TRUE(waiter.permit.has_value());
    EXPECT_EQ(waiter.permit->fencing_token(), b.fencing_token() + 1);
    // Every key of the semaphore is on the master of its slot.
    EXPECT_EQ(node_connection(master).command({"GET", counter_key(name)}).str,
              std::to_string(b.fencing_token() + 1));
  }
}

// Weighted permits on a cluster: units, slots and FIFO across sizes work the same on a master
// reached through the slot map.
TEST_F(ClusterTest, WeightedPermitsKeepTheirOrderOnAClusterMaster) {
  const int master = cluster().master_ports()[1];
  const std::string name = name_on(master, "weighted");
  SemaphoreOptions o;
  o.limit = 4;
  FairSemaphore sem(one_seed(), name, o);
  Permit two = sem.acquire(2);
  EXPECT_EQ(two.slots(), (std::vector<long long>{0, 1}));
  const long long first = two.fencing_token();
  std::future<Permit> three = sem.acquire_async(3);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  EXPECT_FALSE(sem.try_acquire(1));  // 2 units are free, but not before the queued 3
  EXPECT_EQ(two.release(1), fairsem::ReleaseResult::released);
  EXPECT_EQ(two.release(), fairsem::ReleaseResult::released);
  ASSERT_EQ(three.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  Permit granted = three.get();
  EXPECT_EQ(granted.count(), 3);
  EXPECT_EQ(granted.fencing_token(), first + 1);
  EXPECT_EQ(node_connection(master).command({"GET", counter_key(name)}).str,
            std::to_string(first + 1));
}

TEST_F(ClusterTest, ASeedListWithADeadFirstNodeStillFindsTheSlotMap) {
  ConnectionOptions o = one_seed();
  o.port = fairsem::test::free_loopback_port();  // nobody listens there
  o.seeds = {{"127.0.0.1", cluster().master_ports().back()}};
  const std::string name = name_on(cluster().master_ports()[1], "dead-seed");
  FairSemaphore sem(o, name);
  EXPECT_TRUE(sem.try_acquire());
}

TEST_F(ClusterTest, LiveSlotMigrationKeepsSafetyAndOrder) {
  const std::vector<int> masters = cluster().master_ports();
  const int source = masters[0];
  const int target = masters[1];
  const std::string name = name_on(source, "migrating");
  const int slot = RedisCluster::semaphore_slot(name);
  SemaphoreOptions o;
  o.limit = 2;
  // Long enough that the open migration (no script runs meanwhile) never ends a lease.
  o.lease = milliseconds(6000);
  o.renew_interval = milliseconds(300);

  // One holder keeps a permit across the whole migration, renewed by its watchdog; the other
  // permit cycles among four clients in FIFO order.
  FairSemaphore long_sem(one_seed(), name, o);
  Permit long_held = long_sem.acquire();
  Occupancy occupancy;
  occupancy.enter();
  std::mutex mu;
  std::vector<long long> order;  // tokens of the cycling permit, in grant order
  std::vector<std::string> errors;
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      try {
        FairSemaphore sem(one_seed(), name, o);
        while (!stop.load()) {
          Permit p = sem.acquire();
          occupancy.enter();
          {
            std::lock_guard<std::mutex> lock(mu);
            order.push_back(p.fencing_token());
          }
          std::this_thread::sleep_for(milliseconds(2));  // the work done under the permit
          occupancy.leave();
          EXPECT_EQ(p.release(), fairsem::ReleaseResult::released);
        }
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu);
        errors.emplace_back(e.what());
      }
    });
  }
  auto grants = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return order.size();
  };
  ASSERT_TRUE(wait_until([&] { return grants() >= 20; }));

  // Open the migration, and keep it open until the clients have run into it; then move the
  // keys a few at a time, each step after clients were refused again.
  // TRYAGAIN comes from the source from Redis 7.0 (it has some of the keys, not all), before
  // from the target after an ASK (it has none).
  const auto tryagain = [&] {
    return errorstat(source, "TRYAGAIN") + errorstat(target, "TRYAGAIN");
  };
  const long long tryagain_before = tryagain();
  // The target as a node that never ran fairsem: without the function library (Redis 7+), which
  // the first call it gets after the migration has to load.
  Connection target_admin = node_connection(target);
  const bool functions = fairsem::test::has_functions(target_admin);
  if (functions) target_admin.command({"FUNCTION", "FLUSH"});
  cluster().begin_migration(slot, target);
  ASSERT_TRUE(wait_until([&] { return tryagain() >= tryagain_before + 3; }))
      << "no client was told to try again while the slot was migrating";
  // Half-moved: some keys on each node, and the clients refused again.
  ASSERT_GT(cluster().migrate_keys(3), 0U);
  const long long seen = tryagain();
  ASSERT_TRUE(wait_until([&] { return tryagain() > seen; }));
  cluster().finish_migration();
  ASSERT_EQ(cluster().master_port_for_slot(slot), target);

  const std::size_t at_migration_end = grants();
  ASSERT_TRUE(wait_until([&] { return grants() >= at_migration_end + 20; }))
      << "the waiters did not get permits after the migration";
  stop = true;
  for (auto& t : clients) t.join();

  EXPECT_THAT(errors, ::testing::IsEmpty());
  EXPECT_LE(occupancy.max.load(), 2) << "more holders than the limit at once";
  // The long holder's renewals went on through the migration, and now reach the target.
  EXPECT_FALSE(long_held.lost());
  EXPECT_TRUE(long_held.renew());
  std::lock_guard<std::mutex> lock(mu);
  // One permit cycled among the clients, so its grants are in ticket (FIFO) order.
  EXPECT_TRUE(std::is_sorted(order.begin(), order.end()) &&
              std::adjacent_find(order.begin(), order.end()) == order.end())
      << "a later ticket was granted before an earlier one";
  EXPECT_EQ(node_connection(target).command({"EXISTS", counter_key(name)}).integer, 1);
  EXPECT_EQ(
      node_connection(source).command({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}).integer,
      0);
  if (functions) {
    EXPECT_EQ(
        target_admin.command({"FUNCTION", "LIST", "LIBRARYNAME", "fairsem_*"}).elements.size(), 1u)
        << "the target runs the semaphore without having loaded the library";
  }
  EXPECT_EQ(long_held.release(), fairsem::ReleaseResult::released);
}

TEST_F(ClusterTest, AskRedirectionsAreFollowedOnceWithAsking) {
  const std::vector<int> masters = cluster().master_ports();
  const int source = masters[0];
  const int target = masters[2];
  const std::string name = name_on(source, "asked");
  const int slot = RedisCluster::semaphore_slot(name);
  const std::string wake = "fairsem:{" + name + "}:wake:x";
  auto asking_calls = [&] {
    const std::string info = node_connection(target).command({"INFO", "commandstats"}).str;
    const std::size_t at = info.find("cmdstat_asking:calls=");
    return at == std::string::npos ? 0LL : std::stoll(info.substr(at + 21));
  };
  Connection conn(one_seed(), nullptr, slot);
  cluster().begin_migration(slot, target);
  const long long asked_before = asking_calls();
  const long long ask_errors_before = errorstat(source, "ASK");
  // The key is on neither node: the source sends the client to the importing node, where a
  // blocking pop waits (and times out) after ASKING.
  EXPECT_TRUE(conn.command({"BRPOP", wake, "0.05"}, milliseconds(2000)).is_nil());
  EXPECT_EQ(errorstat(source, "ASK"), ask_errors_before + 1);
  EXPECT_EQ(asking_calls(), asked_before + 1);
  // A key created through the redirection lands on the importing node.
  EXPECT_EQ(conn.command({"LPUSH", wake, "1"}).integer, 1);
  EXPECT_EQ(
      node_connection(target).command({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}).integer,
      1);
  cluster().finish_migration();
  // Afterwards the slot's new master answers directly (after one MOVED), without ASKING.
  const long long moved_before = errorstat(source, "MOVED");
  EXPECT_EQ(conn.command({"RPOP", wake}).str, "1");
  EXPECT_EQ(errorstat(source, "MOVED"), moved_before + 1);
  EXPECT_EQ(asking_calls(), asked_before + 2);
}

TEST_F(ClusterTest, FailoverMovesTheSemaphoreToThePromotedReplica) {
  const int old_master = cluster().master_ports()[2];
  const std::string name = name_on(old_master, "failover");
  SemaphoreOptions o;
  o.limit = 1;
  o.lease = milliseconds(6000);
  o.min_replicas = 1;  // every grant and renewal is on the replica before it counts
  o.replica_timeout = milliseconds(2000);
  FairSemaphore sem(one_seed(), name, o);
  Permit held = sem.acquire();
  Waiter waiter(one_seed(), name, o);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));

  const long long moved_before = errorstat(old_master, "MOVED");
  const int promoted = cluster().failover(old_master);
  ASSERT_NE(promoted, old_master);
  EXPECT_EQ(cluster().master_port_for_slot(RedisCluster::semaphore_slot(name)), promoted);
  // The holder's permit is on the new master, and its renewal is followed there and
  // acknowledged by the new master's replica (the old master): the deadline moves on.
  const auto before = held.deadline();
  EXPECT_TRUE(held.renew());
  EXPECT_GT(held.deadline(), before);
  // The client was sent on by the old master, now a replica (not by a reconnect).
  EXPECT_GT(errorstat(old_master, "MOVED"), moved_before);
  EXPECT_FALSE(held.lost());
  EXPECT_EQ(held.release(), fairsem::ReleaseResult::released);
  waiter.join();
  EXPECT_EQ(waiter.error, "");
  ASSERT_TRUE(waiter.permit.has_value());
  EXPECT_EQ(waiter.permit->fencing_token(), held.fencing_token() + 1);
  // The counter reached the promoted replica: it is the waiter's ticket.
  EXPECT_EQ(node_connection(promoted).command({"GET", counter_key(name)}).str,
            std::to_string(waiter.permit->fencing_token()));
}

class SentinelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { group_ = std::make_unique<SentinelGroup>(); }
  static void TearDownTestSuite() { group_.reset(); }
  static SentinelGroup& group() { return *group_; }
  static Connection node_connection(int port) { return ::node_connection(group().node(port)); }
  static ConnectionOptions options() { return patient(ConnectionOptions::from_url(group().url())); }
  static std::string name(const std::string& stem) {
    static std::atomic<int> n{0};
    return stem + "-" + std::to_string(++n);
  }

  static std::unique_ptr<SentinelGroup> group_;
};

std::unique_ptr<SentinelGroup> SentinelTest::group_;

TEST_F(SentinelTest, AcquireAndReleaseGoToTheMasterTheSentinelsName) {
  const std::string n = name("sentinel-basic");
  SemaphoreOptions o;
  o.limit = 1;
  FairSemaphore sem(options(), n, o);
  Permit p = sem.acquire();
  EXPECT_FALSE(sem.try_acquire());
  // The ticket was drawn on the master the sentinels name.
  EXPECT_EQ(node_connection(group().master_port()).command({"GET", counter_key(n)}).str,
            std::to_string(p.fencing_token()));
  EXPECT_EQ(p.release(), fairsem::ReleaseResult::released);
  EXPECT_TRUE(sem.try_acquire());
}

TEST_F(SentinelTest, AGrantNoReplicaAcknowledgesIsGivenBack) {
  const std::string n = name("sentinel-unacknowledged");
  SemaphoreOptions o;
  o.limit = 1;
  o.min_replicas = 2;  // the deployment has one replica
  o.replica_timeout = milliseconds(100);
  FairSemaphore sem(options(), n, o);
  try {
    (void)sem.try_acquire();
    FAIL() << "a grant only one replica acknowledged was accepted";
  } catch (const fairsem::ReplicationError& e) {
    EXPECT_EQ(e.acknowledged(), 1);
    EXPECT_EQ(e.wanted(), 2);
    EXPECT_THAT(e.what(), HasSubstr("only 1 of 2 replicas acknowledged"));
    EXPECT_THAT(e.what(), HasSubstr("the acquire did not happen"));
  }
  EXPECT_THROW((void)sem.acquire(), fairsem::ReplicationError);
  // Neither grant is left behind: the permit is free for a client that needs no replica.
  const fairsem::Status status = sem.status();
  EXPECT_TRUE(status.holders.empty());
  EXPECT_TRUE(status.waiters.empty());
  SemaphoreOptions plain = o;
  plain.min_replicas = 0;
  FairSemaphore other(options(), n, plain);
  EXPECT_TRUE(other.try_acquire());
}

TEST_F(SentinelTest, HolderKeepsItsPermitAcrossAFailoverAndWaitersResume) {
  const std::string n = name("sentinel-failover");
  SemaphoreOptions o;
  o.limit = 1;
  // The lease outlasts the time without a master that has a replica, when the sentinels undo a
  // failover and failover() asks again (see SentinelGroup): about 7 s, seen once in CI.
  o.lease = milliseconds(12000);
  o.min_replicas = 1;
  o.replica_timeout = milliseconds(1300);
  FairSemaphore sem(options(), n, o);
  Permit held = sem.acquire();
  Waiter waiter(options(), n, o);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));

  const int old_master = group().master_port();
  const int promoted = group().failover();
  ASSERT_NE(promoted, old_master);
  // The watchdog renews through the new master: the deadline moves past the failover.
  const auto after_failover = std::chrono::steady_clock::now();
  ASSERT_TRUE(wait_until([&] { return held.deadline() > after_failover + milliseconds(2000); }))
      << "lost: " << held.lost() << ", deadline - after_failover: "
      << std::chrono::duration_cast<milliseconds>(held.deadline() - after_failover).count()
      << " ms\n"
      << node_connection(promoted).command({"INFO", "replication"}).str << group().logs();
  EXPECT_FALSE(held.lost());
  EXPECT_TRUE(held.renew());
  EXPECT_EQ(held.release(), fairsem::ReleaseResult::released);
  waiter.join();
  EXPECT_EQ(waiter.error, "");
  ASSERT_TRUE(waiter.permit.has_value());
  EXPECT_EQ(waiter.permit->fencing_token(), held.fencing_token() + 1);
  // The counter reached the promoted replica: it is the waiter's ticket.
  EXPECT_EQ(node_connection(promoted).command({"GET", counter_key(n)}).str,
            std::to_string(waiter.permit->fencing_token()));
}

// 10 blocking acquires and 10 asynchronous requests of one Client (default connection
// options), queued behind a holder, ride out an automatic Sentinel failover: the master is
// killed once its replica has every entry, and for the seconds until the sentinels promote the
// replica each call fails, past the connection's own reconnect attempts. Each waiter keeps its
// place, and once the holder releases, through the new master, all 20 are granted in the order
// they queued; nothing is left.
TEST_F(SentinelTest, TwentyWaitersRideOutAnAutomaticFailoverInTheOrderTheyQueued) {
  const std::string n = name("sentinel-twenty");
  SemaphoreOptions o;
  o.limit = 1;
  o.lease = milliseconds(30000);  // outlasts a slow failover: the entries are not reaped
  fairsem::Client client(ConnectionOptions::from_url(group().url()));
  FairSemaphore sem(client, n, o);
  std::optional<Permit> holder = sem.acquire();
  fairsem::test::QueuedWaiters waiters(sem, holder, 10, 10);

  const int old_master = group().master_port();
  {
    // A failover keeps only what the replica has: every entry, once it acknowledged them.
    Connection master = node_connection(old_master);
    ASSERT_TRUE(wait_until([&] {
      master.command({"PUBLISH", "fairsem-test", "sync"});
      return master.command({"WAIT", "1", "100"}).integer == 1;
    }));
  }
  group().node(old_master).kill();
  ASSERT_TRUE(wait_until(
      [&] {
        try {
          return group().master_port() != old_master;
        } catch (const std::exception&) {
          return false;  // no sentinel answered
        }
      },
      std::chrono::seconds(30)))
      << group().logs();
  EXPECT_EQ(holder->release(), fairsem::ReleaseResult::released) << group().logs();
  ASSERT_TRUE(waiters.all_done(std::chrono::seconds(60))) << group().logs();
  waiters.join();
  waiters.expect_all_granted_in_order(true);
  EXPECT_TRUE(wait_until([&] { return fairsem::test::queue_empty(sem); }));
  EXPECT_EQ(
      fairsem::test::leftover_keys(node_connection(group().master_port()), "fairsem:{" + n + "}*"),
      std::vector<std::string>{});

  // The old master comes back as the new one's replica, for the tests after this one.
  group().node(old_master).start();
  group().wait_healthy();
}

/// min_replicas on a plain master with one replica (no Sentinel needed: WAIT is the master's).
class ReplicationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(wait_until([&] {
      admin.command({"PUBLISH", "fairsem-test", "sync"});
      return admin.command({"WAIT", "1", "100"}).integer == 1;
    })) << "the replica never caught up";
  }

  /// Options with min_replicas 1: a 10 s lease, renewed only when asked.
  static SemaphoreOptions replicated(long long limit, milliseconds replica_timeout) {
    SemaphoreOptions o;
    o.limit = limit;
    o.lease = std::chrono::seconds(10);
    o.auto_renew = false;
    o.min_replicas = 1;
    o.replica_timeout = replica_timeout;
    return o;
  }

  RedisServer master{{"--repl-diskless-sync-delay", "0"}};
  RedisServer replica{{"--replicaof", "127.0.0.1", std::to_string(master.port())}};
  Connection admin = node_connection(master);
};

TEST_F(ReplicationTest, ARenewalNoReplicaAcknowledgesKeepsTheOldDeadline) {
  std::mutex mu;
  std::vector<std::string> warnings;
  // A generous replica_timeout: the grant needs it on a loaded machine.
  SemaphoreOptions o = replicated(2, milliseconds(2000));
  o.logger = [&](fairsem::LogLevel, std::string_view message) {
    std::lock_guard<std::mutex> lock(mu);
    warnings.emplace_back(message);
  };
  std::vector<std::pair<fairsem::PermitInfo, std::string>> renew_failures;
  o.on_renew_failure = [&](const fairsem::PermitInfo& permit, const std::string& error) {
    std::lock_guard<std::mutex> lock(mu);
    renew_failures.emplace_back(permit, error);
  };
  const ConnectionOptions c = master.options();
  FairSemaphore sem(c, "replicated", o);
  Permit p = sem.acquire();
  const auto granted_deadline = p.deadline();
  // The renewal below must write something: in the grant's own millisecond of the server clock
  // it would store the deadline the grant stored, a no-op write that WAIT rightly counts as
  // acknowledged (a fast server, e.g. Valkey 8, got there 1 run in 4).
  const auto server_ms = [&] {
    const auto time = admin.command({"TIME"});
    return std::stoll(time.elements.at(0).str) * 1000 + std::stoll(time.elements.at(1).str) / 1000;
  };
  const long long granted_by = server_ms();
  ASSERT_TRUE(wait_until([&] { return server_ms() > granted_by; }));

  // A stopped replica acknowledges nothing: the renewal is done on the master, but the
  // holder's deadline stays where the last acknowledged write put it.
  std::optional<fairsem::test::Stopped> stopped(std::in_place, replica.pid());
  EXPECT_TRUE(p.renew());
  EXPECT_EQ(p.deadline(), granted_deadline);
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(warnings.size(), 1U);
    EXPECT_THAT(warnings[0],
                HasSubstr("only 0 of 1 replicas acknowledged the renewal of 1 "
                          "permits within 2000 ms; their deadlines stay as they were"));
    // A failed renewal for on_renew_failure too, with the lease the holder still has.
    ASSERT_EQ(renew_failures.size(), 1U);
    EXPECT_EQ(renew_failures[0].first.id, p.id());
    EXPECT_EQ(renew_failures[0].first.ticket, p.fencing_token());
    EXPECT_GT(renew_failures[0].first.lease_left, milliseconds(0));
    EXPECT_EQ(renew_failures[0].second, warnings[0]);
  }
  EXPECT_EQ(sem.metrics().renewal_failures, 1U);
  EXPECT_EQ(sem.metrics().renewals, 0U);
  // A grant no replica acknowledges is given back (the second permit stays free).
  EXPECT_THROW((void)sem.try_acquire(), fairsem::ReplicationError);
  EXPECT_EQ(sem.status().holders.size(), 1U);

  stopped.reset();
  EXPECT_TRUE(wait_until([&] { return p.renew() && p.deadline() > granted_deadline; }));
}

/// min_replicas with weighted permits: a grant of n units counts only once a replica has it,
/// and one no replica acknowledges gives back all n units, not some of them.
TEST_F(ReplicationTest, AWeightedGrantNoReplicaAcknowledgesGivesBackEveryUnit) {
  FairSemaphore sem(master.options(), "replicated-weighted", replicated(4, milliseconds(2000)));
  Permit p = sem.acquire(3);
  EXPECT_EQ(p.count(), 3);
  EXPECT_EQ(p.slots(), (std::vector<long long>{0, 1, 2}));
  EXPECT_EQ(p.release(1), fairsem::ReleaseResult::released);  // 2 units free now

  std::optional<fairsem::test::Stopped> stopped(std::in_place, replica.pid());
  try {
    (void)sem.try_acquire(2);
    FAIL() << "a weighted grant no replica acknowledged was accepted";
  } catch (const fairsem::ReplicationError& e) {
    EXPECT_EQ(e.acknowledged(), 0);
    EXPECT_EQ(e.wanted(), 1);
  }
  // Both units of the refused grant are free again; the holder keeps its 2.
  fairsem::Status status = sem.status();
  ASSERT_EQ(status.holders.size(), 1U);
  EXPECT_EQ(status.holders[0].id, p.id());
  EXPECT_EQ(status.holders[0].count, 2);
  EXPECT_EQ(status.holders[0].slots, (std::vector<long long>{0, 1}));
  EXPECT_TRUE(status.waiters.empty());

  stopped.reset();
  std::optional<Permit> q;
  ASSERT_TRUE(wait_until([&] {
    try {
      q = sem.try_acquire(2);
    } catch (const fairsem::ReplicationError&) {  // the replica is still catching up
    }
    return q.has_value();
  }));
  EXPECT_EQ(q->count(), 2);
  EXPECT_EQ(q->slots(), (std::vector<long long>{2, 3}));
  EXPECT_GT(q->fencing_token(), p.fencing_token());
  EXPECT_FALSE(sem.try_acquire(1).has_value());
}

// With ClientOptions::batch_calls, a semaphore with min_replicas keeps its calls out of batches:
// its WAIT counts the writes of its own socket, so a script run on another thread's would be
// confirmed by a WAIT that waited for nothing. Sixteen threads call at once while the replica
// is stopped: every grant must fail for want of an acknowledgement, none be confirmed; once it
// is back, grants are confirmed again.
TEST_F(ReplicationTest, BatchedCallsNeverLetAGrantNoReplicaAcknowledgedCount) {
  fairsem::ClientOptions co;
  co.batch_calls = true;
  co.max_connections = 16;
  fairsem::Client client(master.options(), co);
  SemaphoreOptions o = replicated(100, milliseconds(200));
  o.logger = [](fairsem::LogLevel, std::string_view) {};
  FairSemaphore sem(client, "batched-replicated", o);
  std::optional<fairsem::test::Stopped> stopped(std::in_place, replica.pid());
  std::atomic<int> confirmed{0};
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        try {
          if (sem.try_acquire()) ++confirmed;
        } catch (const fairsem::ReplicationError&) {
          ++refused;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(confirmed.load(), 0) << "grants confirmed while the replica was stopped";
  EXPECT_EQ(refused.load(), 160);

  // The replica back, grants are confirmed again, and the 160 refused ones were given back:
  // the 16 taken now are all the holders.
  stopped.reset();
  std::vector<Permit> held;
  EXPECT_TRUE(wait_until([&] {
    try {
      if (std::optional<Permit> p = sem.try_acquire()) held.push_back(std::move(*p));
    } catch (const fairsem::ReplicationError&) {
      // the replica still catching up
    }
    return held.size() == 16;
  }));
  EXPECT_EQ(sem.status().holders.size(), 16U);
}

}  // namespace
