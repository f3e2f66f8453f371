// The stress harness's driver at the end of a run: stopping the workers, checking the log and
// what is left in Redis, and printing the summary and the result.

#include "driver.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "shared_log.hpp"

namespace fairsem::stress {

bool Driver::wait_for_workers(std::int64_t deadline_ns) {
  bool all = true;
  for (auto& w : workers_) {
    if (w.pid <= 0) continue;
    int status = 0;
    pid_t r = 0;
    while ((r = ::waitpid(w.pid, &status, WNOHANG)) == 0 && now_ns() < deadline_ns) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    if (r == 0) {
      ::kill(w.pid, SIGKILL);
      ::waitpid(w.pid, &status, 0);
      failures_.push_back(fmt::format("worker {} did not stop in time; killed", w.pid));
      ++worker_failures_;
      all = false;
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failures_.push_back(fmt::format("worker {} ended with status {:#x}", w.pid, status));
      ++worker_failures_;
      all = false;
    }
    w.pid = -1;
  }
  return all;
}

std::size_t Driver::leaked_entries() {
  // Killed workers' entries expire with their lease; the status call reaps them.
  const std::int64_t deadline = now_ns() + ms_to_ns(3 * s_.lease_ms + 5000);
  std::size_t left = 0;
  do {
    try {
      if (!admin_) admin_.emplace(admin_connection(), name_, prefix_);
      const Status st = admin_->status();
      left = st.holders.size() + st.waiters.size();
      if (left == 0) return 0;
    } catch (const Error& e) {
      fmt::print(stderr, "fairsem_stress: status failed: {}\n", e.what());
    }
    std::this_thread::sleep_for(milliseconds(50));
  } while (now_ns() < deadline);
  return left;
}

std::vector<std::string> Driver::leftover_keys() {
  // Only the counter and the stored limit outlive the permits, and keys on their way out (a
  // TTL): release receipts, wake lists of waiters promoted after they died. A wake list's TTL is
  // the lease of the call that promoted, and the admin's status calls (leaked_entries) promote with
  // SemaphoreAdmin's lease (10 s), longer than this loop waits.
  const std::string base = prefix_ + ":{" + name_ + "}:";
  // With tenants, their weights too, and the virtual times of tenants that went idle ahead.
  const std::set<std::string> allowed = {base + "counter", base + "meta", base + "meta:weights",
                                         base + "owner:idle"};
  const std::string receipts = base + "receipts:";
  const std::string wake_lists = base + "wake:";
  // Clients of the previous release leave a receipt key per release, with a TTL.
  const std::string old_receipts = base + "released:";
  const std::int64_t deadline = now_ns() + ms_to_ns(3 * s_.lease_ms + 5000);
  std::vector<std::string> extra;
  do {
    extra.clear();
    expiring_ = 0;
    try {
      if (!raw_) raw_.emplace(raw_connection());
      std::string cursor = "0";
      do {
        const auto reply =
            raw_->command({"SCAN", cursor, "MATCH", prefix_ + ":*", "COUNT", "1000"});
        cursor = reply.elements.at(0).str;
        for (const auto& k : reply.elements.at(1).elements) {
          if (allowed.count(k.str) != 0) continue;
          if (k.str.rfind(wake_lists, 0) == 0 || k.str.rfind(receipts, 0) == 0 ||
              k.str.rfind(old_receipts, 0) == 0) {
            // -2: it expired between SCAN and PTTL; > 0: on its way out; -1 would be a leak.
            const long long ttl = raw_->command({"PTTL", k.str}).integer;
            if (ttl == -2) continue;
            if (ttl > 0) {
              ++expiring_;
              continue;
            }
          }
          extra.push_back(k.str);
        }
      } while (cursor != "0");
      if (extra.empty()) return extra;
    } catch (const Error& e) {
      fmt::print(stderr, "fairsem_stress: SCAN failed: {}\n", e.what());
    }
    std::this_thread::sleep_for(milliseconds(100));
  } while (now_ns() < deadline);
  if (extra.size() > 20) extra.resize(20);  // enough to tell what leaks
  for (std::string& key : extra) {
    try {
      const auto ttl = raw_->command({"PTTL", key}).integer;
      const auto type = raw_->command({"TYPE", key}).str;
      std::string items;
      if (type == "list") {
        for (const auto& e : raw_->command({"LRANGE", key, "0", "9"}).elements)
          items += " " + e.str;
      } else if (type == "hash") {
        const auto fields = raw_->command({"HKEYS", key}).elements;
        for (std::size_t i = 0; i < fields.size() && i < 10; ++i) items += " " + fields[i].str;
      }
      key += fmt::format(" ({}, ttl {} ms:{})", type, ttl, items);
    } catch (const Error&) {
    }
  }
  return extra;
}

CheckInput Driver::collect() {
  CheckInput in = input_;
  for (std::size_t i : proxy_windows_) in.disturbances[i].pids = proxied_pids_;
  SharedLog& log = shm_->log();
  const std::uint64_t n = std::min(log.next_record.load(), log.capacity);
  in.sections.reserve(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    Record& r = log.record(i);
    const auto state = r.state.load(std::memory_order_acquire);
    if (state == empty) continue;  // reserved by a worker killed before it wrote the record
    if (r.previous != 0) {
      ++(state == timed_out ? previous_timeouts_ : previous_grants_);
      if (state != timed_out && r.lost != 0) ++previous_lost_;
    }
    if (state == timed_out) {
      in.timeouts.push_back({r.units, r.wait_ns, r.deadline_ns, r.enter_ns, r.pid, r.tenant});
      continue;
    }
    if (state == withdrawn) {
      in.withdrawals.push_back({r.units, r.wait_ns, r.enter_ns, r.pid, r.errored != 0});
      continue;
    }
    Section s;
    s.token = r.token;
    s.units = r.units;
    // More slots than the log keeps can only be more than the units: the checker sees a
    // slot set that does not match, as it should.
    const auto kept_slots = [](const std::int64_t* slots, std::int32_t count) {
      return std::vector<std::int64_t>(slots, slots + std::clamp(count, 0, kMaxUnits));
    };
    s.slots = kept_slots(r.slots, r.slot_count);
    if (r.slot_count > kMaxUnits) s.slots.push_back(-1);
    s.wait_ns = r.wait_ns;
    s.enter_ns = r.enter_ns;
    s.deadline_ns = r.deadline_ns;
    s.granted_deadline_ns = r.granted_deadline_ns;
    s.cpu_wait_ns = r.cpu_wait_ns;
    s.partial_ns = r.partial_ns;
    if (s.partial_ns != 0) {
      s.kept = kept_slots(r.kept, r.kept_count);
      s.partial_failed = r.partial_failed != 0;
    }
    s.pid = r.pid;
    s.mode = static_cast<Mode>(r.mode);
    s.left = state == left;
    s.leave_ns = s.left ? r.leave_ns : 0;
    s.lost = r.lost != 0;
    s.release_ns = s.left ? r.release_ns : 0;
    s.partial_done_ns = r.partial_done_ns;
    s.previous = r.previous != 0;
    s.tenant = r.tenant;
    in.sections.push_back(s);
  }
  return in;
}

int Driver::finish() {
  // Thaw and heal everything, then let the workers finish their current step.
  for (const auto& p : pending_conts_) {
    // A freeze runs its full length, so that it proves what it is for.
    while (now_ns() < p.until_ns) std::this_thread::sleep_for(milliseconds(5));
    input_.stops.push_back({workers_[p.slot].pid, p.stop_ns, now_ns()});
    ::kill(workers_[p.slot].pid, SIGCONT);
    workers_[p.slot].stopped = false;
  }
  pending_conts_.clear();
  if (hang_) resume_master();
  if (proxy_) proxy_->set_delay(milliseconds(0));
  load_end_ns_ = now_ns();
  shm_->log().stop.store(1);
  wait_for_workers(now_ns() + ms_to_ns(30'000 + 5 * s_.lease_ms));
  // Permits of the last killed workers come back too.
  const std::int64_t reclaim_deadline = now_ns() + ms_to_ns(2 * s_.lease_ms + 2000);
  while (!reclaiming_.empty() && now_ns() < reclaim_deadline) {
    track_reclaims();
    std::this_thread::sleep_for(milliseconds(5));
  }
  const std::size_t leaked = leaked_entries() + reclaiming_.size();
  if (s_.previous_processes > 0 && leaked == 0) finish_upgrade();
  const auto keys = leftover_keys();
  const CheckInput checked = collect();
  const CheckResult result = check(checked);

  for (const auto& f : result.failures) failures_.push_back(f);
  check_recoveries(checked);
  check_tenants(checked);
  if (leaked > 0) failures_.push_back(fmt::format("{} permits or waiters left in Redis", leaked));
  if (!keys.empty()) {
    failures_.push_back(fmt::format("keys left in Redis: {}", fmt::join(keys, ", ")));
  }
  // Redis hands a killed holder's permit on at its lease deadline, at most one lease after the
  // kill (its last renewal came before it); the bound allows for the status round trip.
  if (latest_deadline_ns_ > ms_to_ns(s_.lease_ms + 100)) {
    failures_.push_back(fmt::format(
        "a killed holder's permit stayed leased until {:.0f} ms after the kill (lease {} ms)",
        static_cast<double>(latest_deadline_ns_) / 1e6, s_.lease_ms));
  }
  // The cluster waits out a hang under its node timeout; one that outlasted it may have been
  // answered by a failover that no window or promotion spacing accounts for.
  if (longest_hang_ns_ >= ms_to_ns(test::RedisCluster::kNodeTimeoutMs)) {
    failures_.push_back(fmt::format(
        "a master-hang lasted {:.0f} ms, past the cluster's node timeout ({} ms)",
        static_cast<double>(longest_hang_ns_) / 1e6, test::RedisCluster::kNodeTimeoutMs));
  }
  for (const auto& kind : enabled_) {
    if (injected_[kind] == 0) failures_.push_back("fault '" + kind + "' was never injected");
  }
  if (enabled("stop") && result.stopped_holders == 0) {
    failures_.push_back("no SIGSTOP caught a holder inside its critical section");
  }
  if (result.grants == 0) failures_.push_back("no permit was granted");
  if (s_.previous_processes > 0 && previous_grants_ == 0) {
    failures_.push_back(fmt::format("no client of {} was granted", s_.previous_release));
  }
  std::uint64_t cancels_broken = 0, callbacks_broken = 0;
  for (const ProcessSlot& ps : shm_->log().processes) {
    cancels_broken += ps.cancels_broken.load();
    callbacks_broken += ps.callbacks_broken.load();
  }
  if (cancels_broken > 0) {
    failures_.push_back(fmt::format(
        "{} cancels that returned true were followed by another outcome than CancelledError",
        cancels_broken));
  }
  if (callbacks_broken > 0) {
    failures_.push_back(fmt::format(
        "{} asynchronous requests' callbacks were not called exactly once", callbacks_broken));
  }
  print_summary(checked, result, leaked, keys);
  return failures_.empty() ? 0 : 1;
}

void Driver::print_summary(const CheckInput& checked, const CheckResult& r, std::size_t leaked,
                           const std::vector<std::string>& keys) {
  std::uint64_t acquire_errors = 0, release_errors = 0, rejected = 0, timed_out = 0, lost = 0;
  std::uint64_t callbacks = 0, cancelled = 0, cancels_broken = 0, callbacks_broken = 0;
  for (const ProcessSlot& ps : shm_->log().processes) {
    callbacks += ps.callback_requests.load();
    cancelled += ps.cancelled.load();
    cancels_broken += ps.cancels_broken.load();
    callbacks_broken += ps.callbacks_broken.load();
    acquire_errors += ps.acquire_errors.load();
    release_errors += ps.release_errors.load();
    rejected += ps.rejected.load();
    timed_out += ps.timed_out.load();
    lost += ps.lost.load();
  }
  const auto ms = [](std::int64_t ns) { return static_cast<double>(ns) / 1e6; };
  std::map<long long, std::size_t> by_units;
  for (const Section& section : checked.sections) ++by_units[section.units];
  std::vector<std::string> units_counts;
  units_counts.reserve(by_units.size());
  for (const auto& [units, count] : by_units)
    units_counts.push_back(fmt::format("{}: {}", units, count));
  fmt::print("\n{:<44} {} (by units {})\n", "grants", r.grants, fmt::join(units_counts, ", "));
  static constexpr const char* kModeNames[] = {
      "acquire",       "try_acquire",           "try_acquire_for",
      "acquire_async", "try_acquire_for_async", "callback"};
  std::map<int, std::size_t> by_mode;
  for (const Section& section : checked.sections) ++by_mode[static_cast<int>(section.mode)];
  std::vector<std::string> mode_counts;
  for (const auto& [mode, count] : by_mode) {
    const bool known = mode >= 0 && mode < static_cast<int>(std::size(kModeNames));
    mode_counts.push_back(fmt::format("{} {}", known ? kModeNames[mode] : "?", count));
  }
  fmt::print("{:<44} {}\n", "grants by kind of request", fmt::join(mode_counts, ", "));
  if (s_.previous_processes > 0) {
    fmt::print("{:<44} {} ({} past their lease when they ended; {} timed out)\n",
               fmt::format("grants to clients of {}", s_.previous_release), previous_grants_,
               previous_lost_, previous_timeouts_);
  }
  fmt::print("{:<44} {} ({} cancelled; {} cancels broken, {} callbacks not called once)\n",
             "asynchronous requests with a callback", callbacks, cancelled, cancels_broken,
             callbacks_broken);
  fmt::print("{:<44} {} ({} failed; {} kept other than the lowest slots)\n", "partial releases",
             r.partial_releases, r.partial_releases_failed, r.partial_wrong_slots);
  fmt::print("{:<44} {} in {} permits (limit {}; over the limit {} times)\n",
             "max units held by valid permits at once", r.max_units, r.max_units_holders, s_.limit,
             r.over_limit_instants);
  fmt::print("{:<44} {}\n", "tokens granted twice", r.duplicate_tokens);
  fmt::print("{:<44} {} of {} (out of range {}, permits' slot sets wrong {})\n",
             "slot holdings shared by valid permits", r.shared_slots, r.slot_holdings,
             r.slots_out_of_range, r.bad_slot_sets);
  fmt::print("{:<44} {}\n", "slot holders whose token did not increase",
             r.slot_tokens_not_increasing);
  fmt::print("{:<44} {} of {} checked ({} passed a request for more units)\n",
             "FIFO violations (blocking waiters)", r.fifo_violations, r.fifo_checked,
             r.fifo_violations_past_heavier);
  fmt::print("{:<44} {} of {} checked\n", "timed-out waiters passed by a later request",
             r.timeouts_overtaken, r.timeouts_checked);
  print_tenants(checked, r);
  fmt::print("{:<44} {} of {} checked\n", "token order violations (all grants)",
             r.token_order_violations, r.token_order_checked);
  fmt::print("{:<44} {:.1f} ms (slack {:.0f} ms; {} over 10 ms)\n",
             "worst order inversion observed", ms(r.worst_inversion_ns), ms(input_.order_slack_ns),
             r.inversions_over_10ms);
  fmt::print(
      "{:<44} out of faults: {} grants, worst {:.1f} ms, p99 {:.1f} ms (bound {:.0f} ms, "
      "{} over); in faults: {} grants, worst {:.1f} ms, p99 {:.1f} ms\n",
      "free before granted (blocking grants)", r.wake_ups_out, ms(r.wake_worst_out_ns),
      ms(r.wake_p99_out_ns), ms(input_.wake_bound_ns), r.wake_ups_late, r.wake_ups_in,
      ms(r.wake_worst_in_ns), ms(r.wake_p99_in_ns));
  fmt::print("{:<44} worst {:.1f} ms (token {}, {} ms of it waiting for a CPU), p99 {:.1f} ms\n",
             "lease used up at the enter (undisturbed)", ms(r.lease_used_worst_ns),
             r.lease_used_worst_token,
             r.lease_used_worst_cpu_wait_ns < 0
                 ? std::string("?")
                 : fmt::format("{:.1f}", ms(r.lease_used_worst_cpu_wait_ns)),
             ms(r.lease_used_p99_ns));
  fmt::print("{:<44} {}\n", "leaked permits (after every worker stopped)", leaked);
  fmt::print("{:<44} {} (and {} wake lists and receipt keys expiring)\n",
             "keys left besides counter and meta", keys.size(), expiring_);
  fmt::print("{:<44} {:.0f} ms over {} permits (lease {} ms; Redis lease deadline {:.0f} ms)\n",
             "longest reclaim of a killed holder's permit", ms(longest_reclaim_ns_), reclaims_,
             s_.lease_ms, ms(latest_deadline_ns_));
  fmt::print("{:<44} {} ({} saw lost(), {} passed on; {} later grants with an older token)\n",
             "holders frozen past their lease", r.stopped_holders,
             r.stopped_holders - r.stopped_holders_not_lost, r.stopped_holders_passed_on,
             r.stopped_holders_token_not_older);
  fmt::print("{:<44} rejected {}, timed out {}, errors {}, release errors {}, lost {}\n",
             "other outcomes", rejected, timed_out, acquire_errors, release_errors, lost);
  if (cluster_) {
    fmt::print("{:<44} {:.0f} ms (longest master-hang {:.0f} ms)\n",
               "longest master-kill until its replica served", ms(longest_promotion_ns_),
               ms(longest_hang_ns_));
  } else {
    fmt::print("{:<44} {:.0f} ms\n", "longest Redis restart (SIGKILL to answering)",
               ms(longest_restart_ns_));
  }
  fmt::print("{:<44} {:.0f} ms after {} faults on a server\n", "longest wait for a grant",
             ms(longest_recovery_ns_), recoveries_.size());
  fmt::print("faults injected:");
  for (const auto& kind : fault_kinds()) {
    if (enabled(kind)) fmt::print(" {} {}", kind, injected_[kind]);
  }
  for (const char* kind : {"waker-kill", "renew-kill"}) {
    if (enabled(kind)) fmt::print(" ({}: {} connections)", kind, killed_[kind]);
  }
  if (proxy_) {
    fmt::print(" (proxy: {} cuts, {} connections blackholed)", proxy_->cuts(),
               proxy_->blackholed());
  }
  fmt::print("\n");
  if (failures_.empty()) {
    fmt::print("RESULT: ok\n");
  } else {
    for (const auto& f : failures_) fmt::print("FAILED: {}\n", f);
    for (const auto& d : r.details) fmt::print("{}\n", d);
  }
}

void Driver::check_recoveries(const CheckInput& checked) {
  std::vector<std::int64_t> entered;
  entered.reserve(checked.sections.size());
  for (const Section& s : checked.sections) entered.push_back(s.enter_ns);
  std::sort(entered.begin(), entered.end());
  for (const std::int64_t end : recoveries_) {
    if (load_end_ns_ - end < kRecoveryBoundNs) continue;
    const auto next = std::upper_bound(entered.begin(), entered.end(), end);
    const std::int64_t gap = next == entered.end() ? load_end_ns_ - end : *next - end;
    longest_recovery_ns_ = std::max(longest_recovery_ns_, gap);
    if (gap > kRecoveryBoundNs) {
      failures_.push_back(fmt::format("no grant within {:.1f} s after a fault on a server ended",
                                      static_cast<double>(gap) / 1e9));
    }
  }
}

}  // namespace fairsem::stress
