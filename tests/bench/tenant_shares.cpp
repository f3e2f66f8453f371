// Fair shares between tenants over time (issue 52): tenants of one semaphore (SemaphoreOptions
// ::tenant, weights set with SemaphoreAdmin::set_tenant_weight), each keeping --queued one-unit
// requests outstanding (asynchronous acquires, each re-issued as soon as its permit is given
// back), every permit held --hold-ms. Prints one JSON line: each tenant's share of the held
// unit-time over the window and the units held on average and at most; --csv writes the shares
// second by second (tenant_shares_plot.py draws them).
//
//   fairsem_bench_tenant_shares --weights 1,2,1 --queued 20 --limit 4 --hold-ms 5 --seconds 30
//   fairsem_bench_tenant_shares --weights 1 --queued 20 --seconds 10          # a lone tenant
//   fairsem_bench_tenant_shares --weights 1,1 --queued 1000,0 --probe-ms 500 --seconds 10
//
// --probe-ms P: every P ms, once the last probe was granted, the last tenant (whose --queued is
// 0) sends one request; the JSON line says, for each, how many grants it took after it queued
// (1: it was the very next grant), counted by fencing token: the grants whose token lies above
// the ticket it queued with (info's {was}ID: a promoted waiter takes a new ticket) and up to
// its own.
//
// Held time is as the harness sees it: from the grant's callback to the release being sent.
// Without --url it measures FAIRSEM_BENCH_URL or a private redis-server (bench_support.hpp).

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench_support.hpp"
#include "fairsem/fairsem.hpp"
#include "fairsem/impl/protocol/scripts.hpp"

namespace fairsem::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Settings {
  std::string url;  // empty: BenchRedis
  std::vector<long long> weights{1, 2, 1};
  std::vector<long long> queued{20};  // one value: every tenant's
  long long limit = 4;
  double hold_ms = 5;
  double seconds = 30;
  double probe_ms = 0;
  std::string csv;
};

/// A granted permit waiting for its release.
struct Held {
  std::size_t tenant = 0;
  Clock::time_point from;
  Permit permit;
};

/// One permit's held interval, in seconds since the start, and its fencing token.
struct Interval {
  std::size_t tenant = 0;
  double from = 0;
  double to = 0;
  long long token = 0;
};

class Run {
 public:
  explicit Run(const Settings& s) : s_(s) {}

  nlohmann::json go() {
    const std::string url = s_.url.empty() ? BenchRedis::instance().url() : s_.url;
    ConnectionOptions connection = ConnectionOptions::from_url(url);
    ClientOptions client_options;
    client_options.worker_threads = 4;
    Client client(connection, client_options);
    const std::string name = fmt::format("tenant-shares-{}", ::getpid());
    info_key_ = detail::semaphore_keys("bench", name)[4];
    {
      SemaphoreAdmin admin(client, name, "bench");
      for (std::size_t t = 0; t < s_.weights.size(); ++t) {
        admin.set_tenant_weight(tenant_name(t), s_.weights[t]);
      }
    }
    for (std::size_t t = 0; t < s_.weights.size(); ++t) {
      SemaphoreOptions o;
      o.limit = s_.limit;
      o.key_prefix = "bench";
      o.tenant = tenant_name(t);
      o.lease = std::chrono::seconds(30);
      sems_.push_back(std::make_unique<FairSemaphore>(client, name, o));
    }
    admin_conn_ = std::make_unique<detail::Connection>(connection);
    start_ = Clock::now();
    end_ = start_ +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s_.seconds));
    for (std::size_t t = 0; t < s_.weights.size(); ++t) {
      for (long long i = 0; i < queued_of(t); ++i) issue(t);
    }
    std::thread releaser([this] { release_loop(); });
    if (s_.probe_ms > 0) probe_loop();
    releaser.join();
    // Pending requests end with CancelledError; permits granted meanwhile are given back.
    sems_.clear();
    std::lock_guard<std::mutex> lock(mutex_);
    for (Held& h : held_) h.permit.release();
    held_.clear();
    return summary();
  }

 private:
  static std::string tenant_name(std::size_t t) { return fmt::format("t{}", t); }
  long long queued_of(std::size_t t) const {
    return t < s_.queued.size() ? s_.queued[t] : s_.queued.back();
  }
  double since_start(Clock::time_point at) const {
    return std::chrono::duration<double>(at - start_).count();
  }

  void issue(std::size_t t) {
    sems_[t]->acquire_async([this, t](std::exception_ptr error, std::optional<Permit> permit) {
      const auto now = Clock::now();
      std::lock_guard<std::mutex> lock(mutex_);
      if (error || !permit) {
        if (!stopping_) ++failed_;
        return;
      }
      held_.push_back(Held{t, now, std::move(*permit)});
      changed_.notify_all();
    });
  }

  // Gives each permit back --hold-ms after its grant and queues the tenant's next request.
  void release_loop() {
    const auto hold = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double, std::milli>(s_.hold_ms));
    std::unique_lock<std::mutex> lock(mutex_);
    while (Clock::now() < end_) {
      if (held_.empty()) {
        changed_.wait_until(lock, end_);
        continue;
      }
      // Holds are equal, so the earliest grant is due first.
      auto first = std::min_element(held_.begin(), held_.end(),
                                    [](const Held& a, const Held& b) { return a.from < b.from; });
      const auto due = first->from + hold;
      if (Clock::now() < due) {
        changed_.wait_until(lock, std::min(due, end_));
        continue;
      }
      Held h = std::move(*first);
      held_.erase(first);
      const auto to = Clock::now();
      intervals_.push_back(
          Interval{h.tenant, since_start(h.from), since_start(to), h.permit.fencing_token()});
      const bool probe = h.tenant + 1 == s_.weights.size() && s_.probe_ms > 0;
      lock.unlock();
      if (probe) {
        const std::string was =
            admin_conn_->command({"HGET", info_key_, "{was}" + h.permit.id()}).str;
        std::lock_guard<std::mutex> probe_lock(mutex_);
        probes_.emplace_back(std::stoll(was.empty() ? "0" : was), h.permit.fencing_token());
      }
      h.permit.release_async([this](std::exception_ptr error, ReleaseResult) {
        if (error) ++release_failed_;
      });
      if (queued_of(h.tenant) > 0) issue(h.tenant);
      lock.lock();
    }
    stopping_ = true;
  }

  // Every --probe-ms, once the previous probe was granted: one request of the last tenant.
  void probe_loop() {
    const auto every = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double, std::milli>(s_.probe_ms));
    for (auto next = start_ + every; next + every < end_; next += every) {
      std::this_thread::sleep_until(next);
      std::size_t sent = 0;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        sent = probes_.size();
      }
      issue(s_.weights.size() - 1);
      // It is recorded when released: wait for that, or the end.
      std::unique_lock<std::mutex> lock(mutex_);
      while (probes_.size() == sent && Clock::now() < end_) {
        changed_.wait_for(lock, std::chrono::milliseconds(5));
      }
      if (probes_.size() == sent) break;
    }
  }

  nlohmann::json summary() {
    const std::size_t n = s_.weights.size();
    const auto seconds = static_cast<std::size_t>(s_.seconds + 0.999);
    std::vector<std::vector<double>> per_second(seconds, std::vector<double>(n, 0));
    std::vector<double> total(n, 0);
    std::vector<std::pair<double, int>> events;  // +1 at a grant, -1 at its release
    for (const Interval& i : intervals_) {
      total[i.tenant] += i.to - i.from;
      for (std::size_t k = static_cast<std::size_t>(i.from);
           k < seconds && static_cast<double>(k) < i.to; ++k) {
        const double overlap =
            std::min(i.to, static_cast<double>(k + 1)) - std::max(i.from, static_cast<double>(k));
        if (overlap > 0) per_second[k][i.tenant] += overlap;
      }
      events.emplace_back(i.from, 1);
      events.emplace_back(i.to, -1);
    }
    std::sort(events.begin(), events.end());
    int now = 0, peak = 0;
    for (const auto& e : events) peak = std::max(peak, now += e.second);
    double all = 0;
    for (double t : total) all += t;
    nlohmann::json shares = nlohmann::json::array(), grants = nlohmann::json::array();
    long long weight_sum = 0;
    for (long long w : s_.weights) weight_sum += w;
    for (std::size_t t = 0; t < n; ++t) {
      long long count = 0;
      for (const Interval& i : intervals_) count += i.tenant == t ? 1 : 0;
      shares.push_back(
          {{"tenant", tenant_name(t)},
           {"weight", s_.weights[t]},
           {"target", static_cast<double>(s_.weights[t]) / static_cast<double>(weight_sum)},
           {"share", all > 0 ? total[t] / all : 0},
           {"grants", count}});
    }
    if (!s_.csv.empty()) write_csv(per_second);
    nlohmann::json out{{"limit", s_.limit},
                       {"hold_ms", s_.hold_ms},
                       {"seconds", s_.seconds},
                       {"grants", intervals_.size()},
                       {"tenants", shares},
                       {"units_held_mean", all / s_.seconds},
                       {"units_held_peak", peak},
                       {"failed", failed_},
                       {"release_failed", release_failed_.load()}};
    if (s_.probe_ms > 0) {
      std::vector<long long> ranks;
      for (const auto& [was, mine] : probes_) {
        long long rank = 0;
        for (const Interval& i : intervals_) rank += i.token > was && i.token <= mine ? 1 : 0;
        ranks.push_back(rank);
      }
      out["probe_grants_until_granted"] = ranks;
    }
    return out;
  }

  void write_csv(const std::vector<std::vector<double>>& per_second) const {
    std::ofstream csv(s_.csv);
    csv << "second";
    for (std::size_t t = 0; t < s_.weights.size(); ++t) {
      csv << ",share_" << tenant_name(t) << "_w" << s_.weights[t];
    }
    csv << ",units_held\n";
    for (std::size_t k = 0; k < per_second.size(); ++k) {
      double all = 0;
      for (double v : per_second[k]) all += v;
      csv << k + 1;
      for (double v : per_second[k]) csv << fmt::format(",{:.4f}", all > 0 ? v / all : 0);
      csv << fmt::format(",{:.3f}\n", all) << std::flush;
    }
  }

  const Settings& s_;
  std::vector<std::unique_ptr<FairSemaphore>> sems_;
  std::unique_ptr<detail::Connection> admin_conn_;
  std::string info_key_;
  Clock::time_point start_, end_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Held> held_;
  std::vector<Interval> intervals_;                      // the releaser's, under mutex_
  std::vector<std::pair<long long, long long>> probes_;  // (ticket queued with, token granted)
  bool stopping_ = false;
  long long failed_ = 0;
  std::atomic<long long> release_failed_{0};
};

}  // namespace
}  // namespace fairsem::bench

int main(int argc, char** argv) {
  fairsem::bench::Settings s;
  CLI::App app{"Fair shares between tenants of one semaphore, over time"};
  app.add_option("--url", s.url, "Redis to measure (default: FAIRSEM_BENCH_URL or a private one)");
  app.add_option("--weights", s.weights, "one weight per tenant")->delimiter(',');
  app.add_option("--queued", s.queued,
                 "requests each tenant keeps outstanding (one, or one per "
                 "tenant)")
      ->delimiter(',');
  app.add_option("--limit", s.limit)->check(CLI::PositiveNumber);
  app.add_option("--hold-ms", s.hold_ms)->check(CLI::NonNegativeNumber);
  app.add_option("--seconds", s.seconds)->check(CLI::PositiveNumber);
  app.add_option("--probe-ms", s.probe_ms, "one request of the last tenant every so often");
  app.add_option("--csv", s.csv, "shares second by second");
  CLI11_PARSE(app, argc, argv);
  if (s.weights.empty() || s.queued.empty()) {
    std::cerr << "--weights and --queued need a value\n";
    return 2;
  }
  fairsem::bench::Run run(s);
  std::cout << run.go().dump() << std::endl;
  return 0;
}
