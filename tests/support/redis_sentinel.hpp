#pragma once

// A real Redis Sentinel deployment on loopback for the tests: one master, one replica and
// three sentinels (`redis-server <conf> --sentinel`) watching them as "mymaster", quorum 2,
// down-after-milliseconds 1000, failover-timeout 10000.
//
// Sentinel's own timers are shortened at start with SENTINEL DEBUG (Redis 7): INFO and hello
// every 250 ms and 500 ms instead of every 10 s and 2 s. A failover then settles in a few seconds
// instead of about twenty: a sentinel turns the old master into a replica only once it has
// reported itself master for 4 hello periods, and it sees that only in its periodic INFO. (The
// same rule lets a sentinel that has not yet heard of a failover undo it; failover() then asks
// again.)
// The order of events is Redis's own; only the periods are shorter. A sentinel restarted with
// node(port).start() runs with the default periods again until retune(port). Redis 6.2 has no
// SENTINEL DEBUG: there failover() itself turns the old master into a replica of the new one
// (REPLICAOF, as the sentinels would 10 to 20 s later), once every sentinel names the new one. The
// data nodes run with repl-diskless-sync-delay 0: the old master's full resync after a failover
// would otherwise wait 5 s. Forming the group takes about 0.5 s, a failover about 2.5 s.
//
// With FAIRSEM_TEST_TLS=1 every process speaks only TLS (see RedisServer): the replica to its
// master, the sentinels to the data nodes and to each other (tls-replication yes, given on the
// command line after the config file, so that it is also in the file each sentinel rewrites).
//
// Every step waits (polling) until all three sentinels agree before it returns, and throws
// std::runtime_error with the processes' logs when they do not.

#include <memory>
#include <string>
#include <vector>

#include "redis_server.hpp"

namespace fairsem::test {

class SentinelGroup {
 public:
  static constexpr const char* kMasterName = "mymaster";

  /// Starts the master, its replica and the three sentinels, and returns once every sentinel
  /// knows the master, the replica (link up) and the two other sentinels.
  SentinelGroup();
  ~SentinelGroup();
  SentinelGroup(const SentinelGroup&) = delete;
  SentinelGroup& operator=(const SentinelGroup&) = delete;

  /// "redis-sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/mymaster", or with TLS
  /// "rediss-sentinel://...?cacert=..." (for the sentinels and the masters they name).
  std::string url() const;
  std::vector<int> sentinel_ports() const;
  /// The master now, as a running sentinel reports it (SENTINEL GET-MASTER-ADDR-BY-NAME).
  int master_port() const;
  /// The data node that is not master_port().
  int replica_port() const;
  /// Both data nodes (the first started as master, the second as its replica).
  std::vector<int> data_ports() const;

  /// Waits until the replica has acknowledged every write made so far (PUBLISH + WAIT 1 on the
  /// master: a forced failover does not wait for that, so without it a write made just before
  /// could be lost), then SENTINEL FAILOVER mymaster (retried while the sentinel answers INPROG
  /// or NOGOODSLAVE), then waits until all three sentinels name the other node as master, it is a
  /// master, the old master replicates from it with the link up, and every sentinel lists exactly
  /// the old master as replica. If the sentinels fail back to the old master on their own (a
  /// sentinel that had not yet learnt the new configuration demotes the new master, seen in CI),
  /// it asks again, up to kMaxFailoverAsks times. Returns the new master's port. Repeatable at once
  /// (sentinel refuses SENTINEL FAILOVER only during a failover or without a healthy replica; the
  /// failover-timeout * 2 pause applies to automatic failovers only).
  int failover();

  /// Waits until the deployment is as described for failover() around master_port() now;
  /// e.g. after a test stopped and restarted a process. Throws after `timeout_ms`.
  /// Healthy includes a replica that has acknowledged the whole replication stream (so WAIT 1
  /// succeeds and a forced failover loses nothing written before).
  void wait_healthy(int timeout_ms = 60000) const;

  /// Shortens the timers of the sentinel on `port` (see above); for a restarted sentinel.
  void retune(int port) const;

  /// The process on `port` (master, replica or sentinel). Throws std::out_of_range.
  RedisServer& node(int port);
  const RedisServer& node(int port) const;

  /// Every process's log tail (and each data node's role now), for failure messages.
  std::string logs() const;

 private:
  [[noreturn]] void fail(const std::string& what) const;
  /// "" when every running sentinel agrees that `master` is the master and `replica` its
  /// healthy replica, and the nodes agree; else what is wrong.
  std::string unhealthy_reason(int master, int replica) const;
  /// "" when the replica of `master` has acknowledged the whole replication stream (PUBLISH,
  /// then WAIT 1 on the same connection); else why not.
  std::string replica_lag(int master) const;
  /// Without tuned timers (Redis 6.2): once every running sentinel names `new_master`, turns
  /// `old_master`, if it still is a master, into its replica, as the sentinels would later.
  void demote_old_master(int old_master, int new_master) const;
  /// SENTINEL FAILOVER on the sentinel on `sentinel`, retried for 30 s while it answers INPROG or
  /// NOGOODSLAVE; throws on any other answer.
  void ask_failover(int sentinel) const;
  /// The lowest config-epoch for the master among the running sentinels (SENTINEL MASTER).
  long long lowest_config_epoch() const;
  /// True once the group is healthy around `old_master` again and every running sentinel has
  /// moved past `epoch_before`: the failover happened and was undone (see failover()).
  bool failed_back(int old_master, int new_master, long long epoch_before) const;

  /// How often failover() asks when the sentinels fail back to the old master.
  static constexpr int kMaxFailoverAsks = 3;

  std::vector<std::unique_ptr<RedisServer>> data_;  // [0] started as master, [1] as replica
  std::vector<std::unique_ptr<RedisServer>> sentinels_;
  /// False once a sentinel refused SENTINEL DEBUG (Redis 6.2): its timers are the defaults.
  mutable bool tuned_ = true;
};

}  // namespace fairsem::test
