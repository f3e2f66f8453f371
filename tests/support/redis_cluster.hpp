#pragma once

// A real Redis Cluster on loopback for the tests: masters and replicas as RedisServer
// processes, joined with `redis-cli --cluster create`, plus the admin steps the tests drive
// (slot migration in steps, manual failover). Every step waits (polling) until all running
// nodes agree again before it returns, and throws std::runtime_error with the nodes' logs
// when they do not.
//
// Nodes run with cluster-node-timeout 2000 ms, cluster-require-full-coverage no (a dead master
// takes only its own slots down), cluster-allow-replica-migration no, and an explicit
// cluster bus port (a free one, not port+10000, which may not exist for a high port). Two
// replication timers are shortened for speed: repl-diskless-sync-delay 0 (a full sync starts at
// once, not after 5 s) and repl-ping-replica-period 1 (CLUSTER SLOTS omits a replica until its
// offset is non-zero, which on an idle master takes until the master's first ping, 10 s by
// default). Forming a 3+3 cluster takes about 3.5 s, a failover about 1 s.
//
// With FAIRSEM_TEST_TLS=1 the nodes speak only TLS (see RedisServer), the cluster bus, MIGRATE
// and replication included, and announce their TLS ports (CLUSTER SLOTS, MOVED, ASK);
// redis-cli and the harness's own connections reach them as RedisServer::options() says.
//
// The accessors ask the nodes (CLUSTER SLOTS, CLUSTER REPLICAS) each time, so they describe the
// cluster as it is now, after failovers and migrations. The methods keep no mutable state
// except the migration in progress, so the read-only ones may be called from any thread.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis_server.hpp"

namespace fairsem::test {

class RedisCluster {
 public:
  /// Starts masters * (1 + replicas_per_master) nodes and creates the cluster (redis-cli needs
  /// masters >= 3). Returns once every node knows every other, reports cluster_state:ok, all
  /// agree on the owner and the replicas of every slot (each master with replicas_per_master),
  /// and every replica's link to its master is up. `extra_args` go to every node, after the
  /// harness's own options (so they override them).
  explicit RedisCluster(int masters = 3, int replicas_per_master = 1,
                        std::vector<std::string> extra_args = {});
  ~RedisCluster();
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  static constexpr int kSlots = 16384;
  /// Every node's cluster-node-timeout.
  static constexpr int kNodeTimeoutMs = 2000;

  /// "redis-cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3" ("rediss-cluster://...?cacert=..."
  /// when the nodes speak TLS): the masters as the cluster was created (sorted by first slot).
  /// Fixed for the cluster's life, as a client's seed list would be.
  std::string seed_url() const;

  /// The master serving `slot` now, from a running node's CLUSTER SLOTS.
  int master_port_for_slot(int slot) const;
  /// The masters now, sorted by the first slot each serves (masters without slots left out).
  std::vector<int> master_ports() const;
  /// Every node's port, in start order.
  std::vector<int> node_ports() const;
  /// A healthy replica of `master_port` (the lowest port if several); throws if it has none.
  int replica_port_of(int master_port) const;
  /// The node's cluster id (fixed for its life, also across restarts).
  std::string node_id(int port) const;
  /// The node's process, to stop, kill or restart it. Throws std::out_of_range.
  RedisServer& node(int port);
  const RedisServer& node(int port) const;

  /// Redis Cluster hash slot of `key`, as fairsem computes it (fairsem::detail::key_slot); the
  /// harness's own test checks it against CLUSTER KEYSLOT.
  static int key_slot(std::string_view key);
  /// The slot of every key of the semaphore `name` (its hash tag is {name}).
  static int semaphore_slot(const std::string& name);

  /// Slot migration in steps, so that a test can run load in between:
  /// CLUSTER SETSLOT <slot> IMPORTING on `to_port`, then MIGRATING on the slot's owner.
  void begin_migration(int slot, int to_port);
  /// Moves up to `max_keys` keys of the slot being migrated (GETKEYSINSLOT, then one MIGRATE
  /// ... KEYS); returns how many it asked to move (0 once the source holds no more keys).
  std::size_t migrate_keys(std::size_t max_keys);
  /// Moves the remaining keys, assigns the slot to the target (CLUSTER SETSLOT <slot> NODE on
  /// the target, the source, then every other master) and waits until all nodes agree.
  void finish_migration();
  /// begin_migration, then finish_migration.
  void migrate_slot(int slot, int to_port);
  /// True between begin_migration and finish_migration.
  bool migrating() const noexcept { return migration_.has_value(); }

  /// Manual failover (CLUSTER FAILOVER on the master's replica, which makes the master pause its
  /// clients until the replica has caught up, so no acknowledged write is lost; reissued if it
  /// times out, as a manual failover does silently after 5 s). Returns once the replica is
  /// a master, the old master is its replica with the link up, and all nodes agree on every
  /// slot's owner with cluster_state:ok. Returns the new master's port.
  int failover(int master_port);

  /// Waits until every running node reports cluster_state:ok, all agree on every slot's
  /// owner and replicas, and every running replica's link is up; throws after `timeout_ms`.
  void wait_stable(int timeout_ms = 60000) const;

  /// The tail of every node's log, with its port and role, for failure messages.
  std::string logs() const;

 private:
  struct Migration {
    int slot;
    int source;
    int target;
  };

  [[noreturn]] void fail(const std::string& what) const;
  /// "" when the cluster is stable (see wait_stable), else what is not.
  std::string unstable_reason() const;
  void create_cluster(const std::vector<int>& ports, int replicas_per_master);

  std::vector<std::unique_ptr<RedisServer>> nodes_;
  std::vector<std::string> ids_;  // parallel to nodes_
  std::vector<int> seeds_;
  std::optional<Migration> migration_;
};

}  // namespace fairsem::test
