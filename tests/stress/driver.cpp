// The stress harness's driver while the load runs: starting redis-server, the fault proxy and
// the worker processes, and injecting the faults.

#include "driver.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "previous_client.hpp"
#include "shared_log.hpp"

extern char** environ;

namespace fairsem::stress {

Driver::Driver(Settings s) : s_(std::move(s)) {
  const std::vector<std::string>& kinds = fault_kinds();
  if (s_.faults == "all") {
    enabled_ = kinds;
  } else if (s_.faults != "none") {
    std::stringstream in(s_.faults);
    for (std::string kind; std::getline(in, kind, ',');) {
      if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) {
        throw CLI::ValidationError(
            "--faults", fmt::format("unknown fault '{}'{}; known: {}", kind,
                                    s_.cluster ? " with --cluster" : "", fmt::join(kinds, ",")));
      }
      enabled_.push_back(kind);
    }
  }
  if (s_.weights.empty() || s_.weights.size() > static_cast<std::size_t>(kMaxUnits)) {
    throw CLI::ValidationError("--weights", fmt::format("1 to {} weights", kMaxUnits));
  }
  for (const int w : s_.weights) {
    if (w > s_.limit) {
      throw CLI::ValidationError(
          "--weights", fmt::format("a weight of {} is more than the limit {}", w, s_.limit));
    }
  }
  if (s_.previous_processes > s_.processes) {
    throw CLI::ValidationError(
        "--previous-processes",
        fmt::format("{} of {} processes", s_.previous_processes, s_.processes));
  }
  if (s_.batched_processes > s_.processes - s_.previous_processes) {
    throw CLI::ValidationError(
        "--batched-processes",
        fmt::format("{} of the {} processes of this release", s_.batched_processes,
                    s_.processes - s_.previous_processes));
  }
  if (s_.previous_processes > 0 && s_.cluster) {
    // Its client runs the scripts on one connection, which follows no redirection.
    throw CLI::ValidationError("--previous-processes", "not with --cluster");
  }
  if (s_.previous_release.empty()) s_.previous_release = test::kPreviousRelease;
  if (s_.tenants > kMaxTenants) {
    throw CLI::ValidationError("--tenants", fmt::format("at most {} tenants", kMaxTenants));
  }
  if (!s_.tenant_weights.empty() &&
      s_.tenant_weights.size() != static_cast<std::size_t>(s_.tenants)) {
    throw CLI::ValidationError("--tenant-weights", "one weight per tenant (--tenants)");
  }
  s_.tenant_weights.resize(static_cast<std::size_t>(s_.tenants), 1);
  if (s_.upgrade_at_s > 0 &&
      (s_.tenants == 0 || s_.previous_processes == 0 || s_.previous_release == "0.2.0" ||
       s_.previous_release.rfind("0.3.", 0) == 0)) {
    // Releases before 0.4 do not read meta's model: they cannot refuse data model 3.
    throw CLI::ValidationError("--upgrade-at-s",
                               "needs --tenants and previous processes of 0.4.0 or later");
  }
  if (s_.upgrade_by != "tenant" && s_.upgrade_by != "weight") {
    throw CLI::ValidationError("--upgrade-by", "tenant or weight");
  }
  if (s_.seed == 0) s_.seed = (static_cast<std::uint64_t>(std::random_device{}()) << 32) | 1;
  rng_.seed(s_.seed);
}

Driver::~Driver() {
  if (hang_) ::kill(hang_->pid, SIGCONT);
  cluster_.reset();
  server_.reset();
  if (!redis_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(redis_dir_, ignored);
  }
}

void Driver::spawn(int slot) {
  Worker& w = workers_[slot];
  const std::string url = w.via_proxy ? proxied_url() : direct_url();
  std::vector<std::string> args = {"fairsem_stress", "--worker", std::to_string(shm_->fd()),
                                   std::to_string(slot), url};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  shm_->log().processes[slot].ready.store(0);
  for (ThreadSlot& t : shm_->log().processes[slot].threads) t.state.store(idle);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ);
  if (rc != 0) throw std::system_error(rc, std::generic_category(), "posix_spawn worker");
  w.pid = pid;
  w.stopped = false;
  if (w.via_proxy) proxied_pids_.push_back(pid);
  shm_->log().processes[slot].pid.store(pid);
}

std::vector<int> Driver::running_slots() const {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(workers_.size()); ++i) {
    if (workers_[i].pid > 0 && !workers_[i].stopped && shm_->log().processes[i].ready.load() != 0) {
      out.push_back(i);
    }
  }
  return out;
}

void Driver::track_reclaims() {
  if (reclaiming_.empty()) return;
  try {
    if (!admin_) admin_.emplace(admin_connection(), name_, prefix_);
    const Status st = admin_->status();
    const std::int64_t at = now_ns();
    for (auto it = reclaiming_.begin(); it != reclaiming_.end();) {
      const auto holder = std::find_if(st.holders.begin(), st.holders.end(),
                                       [&](const PermitInfo& p) { return p.id == it->first; });
      Reclaim& r = it->second;
      if (holder != st.holders.end()) {
        if (!r.deadline_seen) {
          r.deadline_seen = true;
          const std::int64_t deadline = at + ms_to_ns(holder->lease_left.count());
          latest_deadline_ns_ = std::max(latest_deadline_ns_, deadline - r.kill_ns);
        }
        ++it;
        continue;
      }
      longest_reclaim_ns_ = std::max(longest_reclaim_ns_, at - r.kill_ns);
      ++reclaims_;
      it = reclaiming_.erase(it);
    }
  } catch (const Error&) {
    // Redis is restarting: try again at the next tick.
  }
}

int Driver::run() {
  if (s_.cluster) {
    start_cluster();
  } else {
    // The AOF lives on tmpfs: a SIGKILLed redis-server loses nothing it acknowledged either way
    // (appendfsync always writes the AOF before replying), and a disk's fsync latency would
    // throttle the load to a few hundred grants per second.
    char dir[] = "/dev/shm/fairsem-stress-redis-XXXXXX";
    if (::mkdtemp(dir) == nullptr) {
      throw std::system_error(errno, std::generic_category(), "mkdtemp");
    }
    redis_dir_ = dir;
    server_ = std::make_unique<test::RedisServer>(std::vector<std::string>{
        "--dir", redis_dir_, "--appendonly", "yes", "--appendfsync", "always"});
  }
  if (uses_proxy()) proxy_ = std::make_unique<FaultProxy>(server_->port());
  const std::uint64_t capacity = std::max(s_.max_grants, s_.grants + s_.grants / 10);
  shm_ = std::make_unique<SharedMapping>(capacity);
  prefix_ = fmt::format("stress{}", ::getpid());
  Config& cfg = shm_->log().config;
  copy_string(cfg.url, sizeof cfg.url, direct_url());
  copy_string(cfg.name, sizeof cfg.name, name_);
  copy_string(cfg.key_prefix, sizeof cfg.key_prefix, prefix_);
  cfg.limit = s_.limit;
  cfg.lease_ms = s_.lease_ms;
  cfg.hold_us = s_.hold_us;
  cfg.max_timeout_ms = s_.max_timeout_ms;
  cfg.weight_count = static_cast<int>(s_.weights.size());
  std::copy(s_.weights.begin(), s_.weights.end(), cfg.weights);
  cfg.partial_percent = s_.partial_percent;
  cfg.threads = s_.threads;
  cfg.previous_processes = s_.previous_processes;
  cfg.batched_from = s_.processes - s_.batched_processes;
  copy_string(cfg.previous_version, sizeof cfg.previous_version, s_.previous_release);
  cfg.tenants = s_.tenants;
  if (s_.cluster) {
    // A grant or renewal counts once the replica has it, so a failover keeps every permit
    // (docs/deployments.md); at most half of lease - renew interval (lease / 3).
    cfg.min_replicas = 1;
    cfg.replica_timeout_ms = s_.lease_ms / 4;
  }
  input_.limit = s_.limit;
  input_.lease_ns = ms_to_ns(s_.lease_ms);
  input_.order_slack_ns = ms_to_ns(s_.order_slack_ms);
  input_.wake_bound_ns = ms_to_ns(s_.wake_bound_ms > 0 ? s_.wake_bound_ms : s_.lease_ms / 6);
  // A waker whose BRPOP failed during a freeze pauses 200 ms, then reconnects (connect timeout
  // 500 ms) before it listens again.
  input_.thaw_recovery_ns = ms_to_ns(1000);
  input_.tenants = s_.tenants > 0;

  fmt::print(
      "fairsem_stress: {}{} processes{}{} x {} threads, limit {}, weights {}, lease {} ms, {} s, "
      "faults: {}, seed {}\n",
      s_.cluster ? "a 3-master cluster (min_replicas 1), " : "", s_.processes,
      s_.previous_processes > 0
          ? fmt::format(" ({} of them clients of {})", s_.previous_processes, s_.previous_release)
          : std::string(),
      s_.batched_processes > 0
          ? fmt::format(" ({} of them batching their calls)", s_.batched_processes)
          : std::string(),
      s_.threads, s_.limit, fmt::join(s_.weights, ","), s_.lease_ms, s_.seconds,
      enabled_.empty() ? std::string("none") : fmt::format("{}", fmt::join(enabled_, ",")),
      s_.seed);
  std::fflush(stdout);

  start_tenants();
  workers_.resize(static_cast<std::size_t>(s_.processes));
  for (int i = 0; i < s_.processes; ++i) {
    workers_[i].via_proxy = proxy_ && i % 2 == 0;  // half through the proxy, half direct
    spawn(i);
  }
  const std::int64_t start = now_ns();
  load_start_ns_ = start;
  const std::int64_t end = start + static_cast<std::int64_t>(s_.seconds * 1e9);
  std::int64_t next_fault = start + ms_to_ns(s_.fault_interval_ms);
  std::int64_t next_progress = start + ms_to_ns(10'000);
  while (now_ns() < end && shm_->log().full.load() == 0 &&
         (s_.grants == 0 || shm_->log().next_record.load() < s_.grants)) {
    std::this_thread::sleep_for(milliseconds(5));
    const std::int64_t now = now_ns();
    for (auto it = pending_conts_.begin(); it != pending_conts_.end();) {
      if (now < it->until_ns) {
        ++it;
        continue;
      }
      Worker& w = workers_[it->slot];
      input_.stops.push_back({w.pid, it->stop_ns, now_ns()});
      ::kill(w.pid, SIGCONT);
      w.stopped = false;
      it = pending_conts_.erase(it);
    }
    if (hang_ && now >= hang_->until_ns) resume_master();
    if (s_.upgrade_at_s > 0 && upgrade_ns_ == 0 &&
        now >= start + static_cast<std::int64_t>(s_.upgrade_at_s * 1e9)) {
      begin_upgrade();
    }
    if (upgrade_ns_ != 0 && model3_ns_ == 0) watch_upgrade();
    if (delay_ends_ns_ != 0 && now >= delay_ends_ns_) {
      proxy_->set_delay(milliseconds(0));
      delay_ends_ns_ = 0;
    }
    // Not while the semaphore's master hangs: the status call would wait for it (three
    // attempts of the admin connection's 2 s command timeout), and the loop with it, SIGCONT
    // included. A hang meant to stay under the node timeout then lasted 6 s, and the cluster
    // failed the master over: a promotion that no window and no promotion spacing knew of.
    if (!hang_) track_reclaims();
    if (stop_owed_until_ns_ != 0 && (try_stop_worker() || now >= stop_owed_until_ns_)) {
      stop_owed_until_ns_ = 0;
    }
    // A worker that died by itself is a failure (a crash, a sanitizer report).
    for (auto& w : workers_) {
      int status = 0;
      if (w.pid > 0 && ::waitpid(w.pid, &status, WNOHANG) == w.pid) {
        failures_.push_back(fmt::format("worker {} exited early with status {:#x}", w.pid, status));
        ++worker_failures_;
        w.pid = -1;
      }
    }
    if (now >= next_progress) {
      fmt::print("[{:6.0f} s] {} grants and time-outs\n", static_cast<double>(now - start) / 1e9,
                 shm_->log().next_record.load());
      std::fflush(stdout);
      next_progress += ms_to_ns(10'000);
    }
    // Not while the master hangs: every other fault would wait on it.
    if (!enabled_.empty() && now >= next_fault && !hang_) {
      // Every kind once per round, in a random order, so a short run injects each of them.
      if (bag_.empty()) {
        bag_ = enabled_;
        std::shuffle(bag_.begin(), bag_.end(), rng_);
      }
      // A promotion too soon after the last one (kPromotionSpacingNs) gives its turn to
      // another kind; with none left in the round, the next tick tries again.
      const auto too_soon = [&](const std::string& k) {
        return promotes(k) && last_promotion_ns_ != 0 &&
               now < last_promotion_ns_ + kPromotionSpacingNs;
      };
      if (too_soon(bag_.back())) {
        const auto other = std::find_if(bag_.begin(), bag_.end(),
                                        [&](const std::string& k) { return !too_soon(k); });
        if (other == bag_.end()) continue;
        std::iter_swap(other, bag_.end() - 1);
      }
      const std::string kind = bag_.back();
      bag_.pop_back();
      // Not two network faults at once: a delay in progress would hide the next one.
      inject(kind);
      const auto interval = static_cast<std::uint64_t>(s_.fault_interval_ms);
      next_fault = now_ns() + ms_to_ns(static_cast<std::int64_t>(interval / 2 + rng_() % interval));
    }
  }
  return finish();
}

}  // namespace fairsem::stress
