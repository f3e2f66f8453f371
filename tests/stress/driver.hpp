#pragma once

// The stress harness's driver: its settings, and the Driver, which starts redis-server (or a
// Redis Cluster: driver_cluster.cpp) and the worker processes, injects the faults while they
// run (driver.cpp, driver_faults.cpp), then stops everything, checks the log and Redis, and
// prints the summary (driver_report.cpp).

#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "checker.hpp"
#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "fault_proxy.hpp"
#include "redis_cluster.hpp"
#include "redis_server.hpp"
#include "stress_worker.hpp"

namespace fairsem::stress {

// --- the driver -------------------------------------------------------------------------------

inline const std::vector<std::string> kFaultKinds = {
    "kill",       "stop",         "restart", "client-kill", "waker-kill",
    "renew-kill", "script-flush", "delay",   "cut",         "blackhole"};
/// With --cluster: no proxy (the nodes announce their own addresses) and no restart of a lone
/// server, but the semaphore's master hung, killed (its replica promoted) or failed over.
inline const std::vector<std::string> kClusterFaultKinds = {
    "kill",         "stop",        "client-kill", "waker-kill", "renew-kill",
    "script-flush", "master-hang", "master-kill", "failover"};

// Sanitizers slow every step several times over, and with it a client's notice of its grant.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr int kDefaultOrderSlackMs = 250;
#else
constexpr int kDefaultOrderSlackMs = 100;
#endif

struct Settings {
  int processes = 4;
  int threads = 4;
  long long limit = 4;
  /// Each request asks for one of these units, at random.
  std::vector<int> weights = {1, 2, 3};
  /// How many sections of 2 units or more give some back half way through.
  int partial_percent = 30;
  double seconds = 30;
  int lease_ms = 1000;
  int hold_us = 2000;
  /// try_acquire_for waits up to this: long enough past the order slack for the checker to
  /// see whether anyone passed a waiter that timed out.
  int max_timeout_ms = 400;
  std::string faults = "all";
  int fault_interval_ms = 800;
  std::uint64_t max_grants = 4'000'000;
  std::uint64_t grants = 0;  // end the load once this many were granted (0: run for --seconds)
  int order_slack_ms = kDefaultOrderSlackMs;
  /// The longest a blocking grant may come after its units were free, outside fault windows
  /// (checker_wake.hpp); 0: half a poll interval (lease / 6).
  int wake_bound_ms = 0;
  std::uint64_t seed = 0;  // 0: random
  /// A 3-master Redis Cluster with a replica each, the workers on min_replicas 1.
  bool cluster = false;
  /// A rolling upgrade: this many of the worker processes run clients of the previous release
  /// (previous_worker.cpp) on the same semaphore.
  int previous_processes = 0;
  /// This many of the worker processes (the last ones) run with ClientOptions::batch_calls.
  int batched_processes = 0;
  /// The release those previous processes run: a directory of
  /// tests/integration/previous_release/ (empty: test::kPreviousRelease).
  std::string previous_release;
  /// Each thread of this release names one of this many tenants (worker_tenants.hpp), whose
  /// weights (1 each unless given) are stored before the load, or at the upgrade (0: none).
  int tenants = 0;
  std::vector<int> tenant_weights;
  /// With previous processes of 0.4 or later: this many seconds into the load the semaphore is
  /// upgraded to data model 3 under them (0: never), by this release's threads naming their
  /// tenants from then on (upgrade_by "tenant"), or by the driver storing the tenants' weights
  /// first ("weight"). Their clients must be refused from then on, and only from then on.
  double upgrade_at_s = 0;
  std::string upgrade_by = "tenant";
};

struct Worker {
  pid_t pid = -1;
  bool stopped = false;
  bool via_proxy = false;
};

class Driver {
 public:
  explicit Driver(Settings s);
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  int run();

 private:
  bool enabled(const std::string& kind) const {
    return std::find(enabled_.begin(), enabled_.end(), kind) != enabled_.end();
  }
  const std::vector<std::string>& fault_kinds() const {
    return s_.cluster ? kClusterFaultKinds : kFaultKinds;
  }
  bool uses_proxy() const { return enabled("delay") || enabled("cut") || enabled("blackhole"); }
  std::string direct_url() const { return cluster_ ? cluster_->seed_url() : server_->url(); }
  /// The server through the fault proxy, over TLS when the server speaks it (FAIRSEM_TEST_TLS).
  std::string proxied_url() const {
    ConnectionOptions c = server_->options();
    c.port = proxy_->port();
    return c.redacted_url();  // no password: the harness's servers need none
  }
  /// `c` with the driver's own connections' settings: a stuck server costs a tick, not the run.
  static ConnectionOptions for_admin(ConnectionOptions c) {
    c.command_timeout = milliseconds(2000);
    c.reconnect_attempts = 3;
    c.reconnect_backoff_max = milliseconds(100);
    return c;
  }
  ConnectionOptions admin_connection() const {
    return for_admin(ConnectionOptions::from_url(direct_url()));
  }
  /// For raw_: the server, or the master that serves the semaphore now.
  ConnectionOptions raw_connection() const;
  /// raw_, made when there is none; on a Cluster, checked (ROLE) to be a master still, and made
  /// again if not. Throws what connecting throws, or ConnectionError when the slot map named a
  /// node that is no master: the callers' loops try again.
  detail::Connection& raw();

  // The Redis Cluster mode (driver_cluster.cpp).
  void start_cluster();
  /// The master serving the semaphore's hash slot now.
  int semaphore_master() const;
  /// SIGSTOP of that master for less than the cluster's node timeout (no failover), SIGCONT at
  /// a later tick of the run (resume_master).
  void hang_master();
  void resume_master();
  /// SIGKILL of that master; returns once its replica serves the slot, the old one started
  /// again (as the new one's replica) and the cluster is stable.
  void kill_master();
  /// CLUSTER FAILOVER on its replica (no acknowledged write lost).
  void fail_over();
  /// master-kill and failover promote a replica; one may start only this long after the last
  /// promotion ended. A node whose last election attempt is younger than Redis's retry time
  /// (2 x max(2 node timeouts, 2 s)) keeps that attempt's votes: a manual failover then "wins"
  /// at once with a stale epoch and is undone at the next heartbeat (seen in CI, two failovers
  /// 1.6 s apart: "the old master ... is master of 0").
  static bool promotes(const std::string& kind) {
    return kind == "master-kill" || kind == "failover";
  }
  static constexpr std::int64_t kPromotionSpacingNs =
      (4LL * test::RedisCluster::kNodeTimeoutMs + 1000) * 1'000'000;
  /// Liveness after each fault on a server (a master's hang, kill or failover; a restart, a
  /// blackhole): some request was granted within kRecoveryBound of its end (faults that ended
  /// closer than that to the end of the load are not judged).
  void check_recoveries(const CheckInput& checked);
  static constexpr std::int64_t kRecoveryBoundNs = 10'000'000'000;

  void spawn(int slot);
  void inject(const std::string& kind);
  void inject_once(const std::string& kind);
  void kill_worker();
  /// A stop: freezes a worker while one of its threads holds a permit. When no thread of a
  /// running worker holds one now, the stop is owed, and tried again at each tick of the run
  /// for up to two leases (try_stop_worker), so that it is injected whatever the moment.
  void stop_worker();
  /// One try: true when a worker with a holding thread was frozen.
  bool try_stop_worker();
  void restart_redis();
  /// waker-kill: CLIENT KILL of every client blocked in BRPOP, the workers' wake-up
  /// connections; renew-kill: of every connection named "...:renew", their renewal lanes'.
  void kill_clients(const std::string& kind);
  void raw_command(const std::string& kind, std::initializer_list<std::string_view> argv,
                   milliseconds disturbed_for);
  void wait_until_loaded();
  void track_reclaims();
  std::vector<int> running_slots() const;
  /// A window in which a fault may have delayed grants: of every worker, or (`proxied`) of
  /// those connected through the proxy.
  void disturb(std::int64_t from, std::int64_t to, bool proxied = false) {
    input_.disturbances.push_back({from, to, {}});
    if (proxied) proxy_windows_.push_back(input_.disturbances.size() - 1);
  }
  /// A fault on the server or the network, from its start until its recovery (the checker
  /// adds a lease; kills and stops it takes from their own records).
  void fault(std::int64_t from, std::int64_t recovered) {
    input_.fault_windows.push_back({from, recovered, {}});
  }
  int finish();
  bool wait_for_workers(std::int64_t deadline_ns);
  std::size_t leaked_entries();
  std::vector<std::string> leftover_keys();
  /// With --previous-processes: one acquire and release by this version once every worker
  /// stopped, as the first use after the upgrade.
  void finish_upgrade();
  // Tenants and the upgrade to their data model (driver_tenants.cpp).
  /// Before the workers: the tenants' weights stored and tenants_on, unless an upgrade is due.
  void start_tenants();
  /// At --upgrade-at-s: the upgrade begins (upgrade_ns_).
  void begin_upgrade();
  /// Each tick after it began, until meta says model 3 (model3_ns_).
  void watch_upgrade();
  /// Stores every tenant's weight, retried through faults for a while; false if it never did.
  bool store_weights();
  /// The failures of the tenants' mode and the upgrade, and their lines of the summary.
  void check_tenants(const CheckInput& checked);
  void print_tenants(const CheckInput& checked, const CheckResult& r) const;
  CheckInput collect();
  void print_summary(const CheckInput& checked, const CheckResult& result, std::size_t leaked,
                     const std::vector<std::string>& keys);

  Settings s_;
  std::vector<std::string> enabled_;
  std::mt19937_64 rng_;
  std::string redis_dir_;
  std::unique_ptr<test::RedisServer> server_;
  std::unique_ptr<test::RedisCluster> cluster_;
  struct Hang {
    pid_t pid = -1;
    std::int64_t from_ns = 0;
    std::int64_t until_ns = 0;
  };
  std::optional<Hang> hang_;               // a master SIGSTOPped now
  std::int64_t longest_hang_ns_ = 0;       // master-hang: SIGSTOP until SIGCONT
  std::int64_t longest_promotion_ns_ = 0;  // master-kill: SIGKILL until the replica serves
  std::vector<std::int64_t> recoveries_;   // when each fault on a server ended
  std::int64_t last_promotion_ns_ = 0;     // when the last master-kill or failover ended
  std::int64_t load_start_ns_ = 0;
  std::int64_t load_end_ns_ = 0;
  std::int64_t longest_recovery_ns_ = 0;  // such a fault's end until the next grant
  std::unique_ptr<FaultProxy> proxy_;
  std::unique_ptr<SharedMapping> shm_;
  std::string name_ = "stress";
  std::string prefix_;
  std::vector<Worker> workers_;
  std::map<std::string, int> injected_;
  int stop_misses_ = 0;
  std::int64_t stop_owed_until_ns_ = 0;  // 0: no stop owed
  int worker_failures_ = 0;
  std::vector<std::string> failures_;
  CheckInput input_;
  // Permits held by a SIGKILLed worker, until Redis no longer lists them.
  struct Reclaim {
    std::int64_t kill_ns = 0;
    bool deadline_seen = false;
  };
  std::map<std::string, Reclaim> reclaiming_;
  std::int64_t longest_reclaim_ns_ = 0;  // kill -> first status that no longer lists it
  /// kill -> the permit's lease deadline in Redis, the latest among the killed permits: when
  /// Redis hands it on (bounded above by the status reply's arrival + its lease_left).
  std::int64_t latest_deadline_ns_ = 0;
  std::size_t reclaims_ = 0;
  std::size_t expiring_ = 0;           // release receipts and wake lists still expiring at the end
  std::uint64_t previous_grants_ = 0;  // sections of clients of the previous release
  std::uint64_t previous_timeouts_ = 0;     // and their timed waits that gave up
  std::uint64_t previous_lost_ = 0;         // and their sections that ended past their lease
  std::int64_t upgrade_ns_ = 0;             // when the upgrade to data model 3 began (0: not yet)
  std::int64_t model3_ns_ = 0;              // when the driver first saw meta's model 3 after that
  std::vector<std::size_t> proxy_windows_;  // indexes into input_.disturbances
  std::vector<int> proxied_pids_;           // every worker that ever used the proxy
  std::optional<SemaphoreAdmin> admin_;
  std::optional<detail::Connection> raw_;
  std::vector<std::string> bag_;  // fault kinds still to inject in this round
  struct PendingCont {
    int slot;
    std::int64_t stop_ns;
    std::int64_t until_ns;
  };
  std::vector<PendingCont> pending_conts_;
  std::int64_t delay_ends_ns_ = 0;
  std::map<std::string, std::size_t> killed_;  // connections the waker- and renew-kills cut
  std::int64_t longest_restart_ns_ = 0;        // SIGKILL of redis-server until it answers again
};

}  // namespace fairsem::stress
