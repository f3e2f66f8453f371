// The stress harness on a Redis Cluster (--cluster): 3 masters with a replica each, the
// semaphore on whichever master serves its hash slot, and the faults aimed at that master: a
// hang shorter than the node timeout, a SIGKILL that the cluster answers by promoting the
// replica, and a manual failover. The workers run with min_replicas 1, so every grant and
// renewal they count on is on the replica before they use it.

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "driver.hpp"
#include "wait.hpp"

namespace fairsem::stress {

void Driver::start_cluster() { cluster_ = std::make_unique<test::RedisCluster>(3, 1); }

int Driver::semaphore_master() const {
  return cluster_->master_port_for_slot(test::RedisCluster::key_slot(name_));
}

ConnectionOptions Driver::raw_connection() const {
  if (!cluster_) return admin_connection();
  return for_admin(cluster_->node(semaphore_master()).options());
}

detail::Connection& Driver::raw() {
  if (!cluster_) {
    if (!raw_) raw_.emplace(raw_connection());
    return *raw_;
  }
  // The semaphore's master can change under the driver: an automatic failover (a hang that
  // outlasted the node timeout on a loaded machine), or a slot map read from a node that had not
  // caught up. A fault sent to a replica would miss, or fail (FUNCTION FLUSH: READONLY, seen in
  // CI's TLS pass): the connection must reach a master, or the caller tries again.
  if (raw_) {
    const detail::Reply role = raw_->command({"ROLE"});
    if (role.elements.empty() || role.elements[0].str != "master") raw_.reset();
  }
  if (!raw_) {
    raw_.emplace(raw_connection());
    const detail::Reply role = raw_->command({"ROLE"});
    if (role.elements.empty() || role.elements[0].str != "master") {
      raw_.reset();
      throw ConnectionError("fairsem_stress: the slot map named a node that is not a master");
    }
  }
  return *raw_;
}

void Driver::hang_master() {
  const int port = semaphore_master();
  const pid_t pid = cluster_->node(port).pid();
  // Under the node timeout (2 s): the cluster waits for it, and so must every client.
  const auto length = milliseconds(500 + rng_() % 1000);
  ::kill(pid, SIGSTOP);
  const std::int64_t at = now_ns();
  hang_ = Hang{pid, at, at + ms_to_ns(length.count())};
  ++injected_["master-hang"];
}

void Driver::resume_master() {
  ::kill(hang_->pid, SIGCONT);
  const std::int64_t at = now_ns();
  longest_hang_ns_ = std::max(longest_hang_ns_, at - hang_->from_ns);
  // Its clients' calls timed out (1 s) and reconnect after it answers again.
  disturb(hang_->from_ns, at + ms_to_ns(2000));
  fault(hang_->from_ns, at);
  recoveries_.push_back(at);
  hang_.reset();
  raw_.reset();
}

void Driver::kill_master() {
  // A replica to promote: after a hang or a failover its link may still be syncing.
  cluster_->wait_stable();
  const int old_master = semaphore_master();
  cluster_->node(old_master).kill();
  const std::int64_t down = now_ns();
  raw_.reset();
  std::string why;
  const bool promoted = test::wait_until(
      [&] {
        try {
          return semaphore_master() != old_master;
        } catch (const std::exception& e) {
          why = e.what();
          return false;
        }
      },
      std::chrono::seconds(30));
  if (!promoted) {
    throw std::runtime_error("no replica took over from the killed master: " + why + "\n" +
                             cluster_->logs());
  }
  const std::int64_t serving = now_ns();
  longest_promotion_ns_ = std::max(longest_promotion_ns_, serving - down);
  // Back as the new master's replica: the next fault has a replica to promote again.
  cluster_->node(old_master).start();
  cluster_->wait_stable();
  const std::int64_t stable = now_ns();
  last_promotion_ns_ = stable;
  disturb(down, stable + ms_to_ns(2000));
  recoveries_.push_back(stable);
  ++injected_["master-kill"];
}

void Driver::fail_over() {
  cluster_->wait_stable();  // as in kill_master
  const std::int64_t from = now_ns();
  (void)cluster_->failover(semaphore_master());
  raw_.reset();
  const std::int64_t done = now_ns();
  last_promotion_ns_ = done;
  disturb(from, done + ms_to_ns(1000));
  recoveries_.push_back(done);
  ++injected_["failover"];
}

}  // namespace fairsem::stress
