// The throughput ceiling (issue 30, item 3): how many grants per second one Redis sustains, and
// what each costs it. One process, one fairsem::Client (as the library wants it), T threads,
// each looping acquire -> (hold) -> release over S semaphores named STEM-0, STEM-1, ... (their
// hash tags {STEM-n} spread them over a cluster's slots; --spread makes it exactly even per
// master), for a fixed window. Prints one JSON line: grants, seconds, grants/s, and grants by
// hash slot (to attribute them to a cluster's masters). ceiling.sh runs 4 of these processes at
// once beside the npm peer (peer.mjs ceiling, the same loop) and reads Redis's CPU around the
// window.
//
// Modes:
//   uncontended  every semaphore has limit --limit (64: no thread ever waits, even if all 64
//                threads of 4 processes picked one semaphore) and each acquire picks a semaphore
//                at random: the cost of a grant that queues behind nobody.
//   contended    limit 1 and 16 semaphores (named ceilc-n) unless told otherwise; thread t always
//                takes semaphore t % S. With 4 processes of 16 threads, four threads (one per
//                process) contend for each semaphore, so nearly every grant is a hand-off to a
//                waiter through Redis.
//
//   fairsem_bench_ceiling --threads 16 --semaphores 1000 --limit 64 --seconds 10
//   fairsem_bench_ceiling --mode contended --semaphores 16 --limit 1 --url redis://127.0.0.1:P
//   fairsem_bench_ceiling --start-at-ms EPOCH_MS ...   # several processes, one common window
//   fairsem_bench_ceiling --serve-cluster              # for ceiling.sh: a private 3-master cluster
//
// Without --url it measures FAIRSEM_BENCH_URL or a private redis-server (bench_support.hpp).
// --serve-cluster starts a 3-master cluster (no replicas) with the tests' RedisCluster, prints
// {"url", "masters": [{"port", "pid", "slots": [[first, last], ...]}]} and keeps it until
// SIGTERM or SIGINT.

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench_support.hpp"
#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/router.hpp"
#include "fairsem/impl/protocol/reply.hpp"
#include "redis_cluster.hpp"

namespace fairsem::bench {
namespace {

using Steady = std::chrono::steady_clock;
using System = std::chrono::system_clock;

struct Settings {
  std::string url;  // empty: BenchRedis
  bool cluster = false;
  std::string mode = "uncontended";
  int threads = 16;
  int semaphores = 1000;
  long long limit = 64;
  double seconds = 10;
  double hold_us = 0;
  std::string stem = "ceil";
  std::string spread;         // "0-5460,5461-10922,...": name i in group i % groups (see names())
  long long start_at_ms = 0;  // 0: as soon as every thread is ready
  bool batch_calls = false;   // ClientOptions::batch_calls
};

/// What one thread did: grants by semaphore index, and whether it failed.
struct ThreadResult {
  std::vector<long long> grants;
  bool failed = false;
};

/// One thread's loop until `end`. Counts a grant once its release returned inside the window.
void loop(std::vector<FairSemaphore>& sems, const Settings& s, int index, Steady::time_point end,
          ThreadResult& out) {
  out.grants.assign(sems.size(), 0);
  const bool contended = s.mode == "contended";
  std::minstd_rand rng(static_cast<unsigned>(::getpid()) * 7919U + static_cast<unsigned>(index));
  std::uniform_int_distribution<std::size_t> pick(0, sems.size() - 1);
  try {
    while (Steady::now() < end) {
      const std::size_t i = contended ? static_cast<std::size_t>(index) % sems.size() : pick(rng);
      Permit p = sems[i].acquire();
      if (s.hold_us > 0) {
        std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(s.hold_us));
      }
      p.release();
      if (Steady::now() < end) ++out.grants[i];
    }
  } catch (const std::exception& e) {
    std::cerr << "fairsem_bench_ceiling: thread " << index << " failed: " << e.what() << "\n";
    out.failed = true;
  }
}

/// The semaphores' names. Without --spread, STEM-0 .. STEM-(S-1). With it (comma-separated
/// groups of slot ranges joined by '+', one group per master, e.g. "0-5460,5461-10922,
/// 10923-16383"), name i is the next of STEM-0, STEM-1, ... whose hash slot lies in group
/// i % groups, so every master serves the same number of semaphores (peer.mjs picks the same).
std::vector<std::string> names(const Settings& s) {
  std::vector<std::vector<std::pair<int, int>>> groups;
  for (const std::string& group : CLI::detail::split(s.spread, ',')) {
    if (group.empty()) continue;
    groups.emplace_back();
    for (const std::string& range : CLI::detail::split(group, '+')) {
      const auto dash = range.find('-');
      if (dash == std::string::npos) throw std::invalid_argument("--spread: bad range " + range);
      const int first = std::stoi(range.substr(0, dash));
      const int last = std::stoi(range.substr(dash + 1));
      if (first < 0 || last < first || last >= 16384) {
        throw std::invalid_argument("--spread: bad range " + range);
      }
      groups.back().emplace_back(first, last);
    }
  }
  std::vector<std::string> out;
  for (int n = 0; static_cast<int>(out.size()) < s.semaphores; ++n) {
    std::string name = fmt::format("{}-{}", s.stem, n);
    const int slot = detail::key_slot(name);
    const bool in_group =
        groups.empty() || std::any_of(groups[out.size() % groups.size()].begin(),
                                      groups[out.size() % groups.size()].end(),
                                      [&](auto r) { return r.first <= slot && slot <= r.second; });
    if (in_group) out.push_back(std::move(name));
  }
  return out;
}

int run(const Settings& s) {
  ConnectionOptions connection =
      ConnectionOptions::from_url(s.url.empty() ? BenchRedis::instance().url() : s.url);
  if (s.cluster) connection.cluster = true;
  ClientOptions client_options;
  // One pool connection per thread, so that threads never queue for a connection in the process.
  client_options.max_connections =
      std::max<std::size_t>(client_options.max_connections, static_cast<std::size_t>(s.threads));
  client_options.batch_calls = s.batch_calls;
  Client client(connection, client_options);
  SemaphoreOptions options;
  options.limit = s.limit;

  // Every semaphore is opened (a round trip each) before the window: that is set-up, not load.
  const std::vector<std::string> named = names(s);
  std::vector<FairSemaphore> sems;
  sems.reserve(named.size());
  for (const std::string& name : named) sems.emplace_back(client, name, options);

  // The window: from --start-at-ms (shared by the processes ceiling.sh starts) or from now.
  double late_ms = 0;
  Steady::time_point start = Steady::now();
  if (s.start_at_ms > 0) {
    const auto start_at = System::time_point(std::chrono::milliseconds(s.start_at_ms));
    const auto wait = start_at - System::now();
    late_ms = -std::chrono::duration<double, std::milli>(wait).count();
    if (late_ms > 0) {
      std::cerr << fmt::format("fairsem_bench_ceiling: ready {:.0f} ms after --start-at-ms\n",
                               late_ms);
    } else {
      late_ms = 0;
      start += std::chrono::duration_cast<Steady::duration>(wait);
    }
  }
  const Steady::time_point end = start + std::chrono::duration_cast<Steady::duration>(
                                             std::chrono::duration<double>(s.seconds));
  std::this_thread::sleep_until(start);

  std::vector<ThreadResult> results(static_cast<std::size_t>(s.threads));
  std::vector<std::thread> threads;
  for (int t = 0; t < s.threads; ++t) {
    threads.emplace_back(loop, std::ref(sems), std::cref(s), t, end,
                         std::ref(results[static_cast<std::size_t>(t)]));
  }
  for (auto& t : threads) t.join();

  long long grants = 0;
  int failed = 0;
  std::map<int, long long> by_slot;  // hash slot of {name} -> grants
  for (const ThreadResult& r : results) {
    failed += r.failed ? 1 : 0;
    for (std::size_t i = 0; i < r.grants.size(); ++i) {
      grants += r.grants[i];
      if (r.grants[i] > 0) by_slot[detail::key_slot(named[i])] += r.grants[i];
    }
  }
  nlohmann::json slots = nlohmann::json::object();
  for (const auto& [slot, n] : by_slot) slots[std::to_string(slot)] = n;
  std::cout << nlohmann::ordered_json{{"impl", "fairsem"},
                                      {"mode", s.mode},
                                      {"threads", s.threads},
                                      {"semaphores", s.semaphores},
                                      {"limit", s.limit},
                                      {"hold_us", s.hold_us},
                                      {"seconds", s.seconds},
                                      {"grants", grants},
                                      {"grants_per_s", static_cast<double>(grants) / s.seconds},
                                      {"late_ms", late_ms},
                                      {"failed_threads", failed},
                                      {"grants_by_slot", slots}}
                   .dump()
            << std::endl;
  return failed > 0 || grants == 0 ? 1 : 0;
}

/// A private 3-master cluster for ceiling.sh: described on stdout, kept until SIGTERM/SIGINT.
int serve_cluster() {
  test::RedisCluster cluster(3, 0);
  nlohmann::json masters = nlohmann::json::array();
  for (const int port : cluster.master_ports()) {
    detail::Connection conn(cluster.node(port).options());
    nlohmann::json ranges = nlohmann::json::array();
    // Named: a temporary in the range expression would not live through the loop.
    const detail::Reply slots = conn.command({"CLUSTER", "SLOTS"});
    for (const detail::Reply& range : detail::expect_array(slots, "CLUSTER SLOTS")) {
      const auto& fields = detail::expect_array(range, "a CLUSTER SLOTS range", 3);
      const auto& master = detail::expect_array(fields[2], "its master", 2);
      if (detail::expect_integer(master[1], "the master's port") != port) continue;
      ranges.push_back({detail::expect_integer(fields[0], "first slot"),
                        detail::expect_integer(fields[1], "last slot")});
    }
    masters.push_back({{"port", port}, {"pid", cluster.node(port).pid()}, {"slots", ranges}});
  }
  // Blocked only now: the nodes, started before, keep the default dispositions. (They die with
  // this process in any case: RedisServer sets PR_SET_PDEATHSIG.)
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  std::cout << nlohmann::json{{"url", cluster.seed_url()}, {"masters", masters}}.dump()
            << std::endl;
  int signal = 0;
  sigwait(&stop, &signal);
  return 0;  // ~RedisCluster stops the nodes
}

}  // namespace
}  // namespace fairsem::bench

int main(int argc, char** argv) {
  using namespace fairsem::bench;
  Settings s;
  bool serve = false;
  CLI::App app{"fairsem: grants/s of T threads over S semaphores, for the throughput ceiling"};
  app.add_option("--url", s.url, "Redis URL (default: FAIRSEM_BENCH_URL or a private server)");
  app.add_flag("--cluster", s.cluster, "the URL is a Redis Cluster seed (redis-cluster:// is too)");
  app.add_option("--mode", s.mode, "uncontended: random semaphore; contended: thread t on t % S")
      ->check(CLI::IsMember({"uncontended", "contended"}));
  app.add_option("--threads", s.threads, "threads, sharing one Client")->check(CLI::Range(1, 1024));
  auto* semaphores = app.add_option("--semaphores", s.semaphores, "semaphores (contended: 16)")
                         ->check(CLI::Range(1, 100000));
  auto* limit = app.add_option("--limit", s.limit, "limit of every semaphore (contended: 1)")
                    ->check(CLI::Range(1, 100000));
  app.add_option("--seconds", s.seconds, "length of the window")->check(CLI::Range(0.1, 3600.0));
  app.add_option("--hold-us", s.hold_us, "time each permit is held")->check(CLI::Range(0.0, 1e6));
  auto* stem = app.add_option("--stem", s.stem, "names STEM-0 .. STEM-(S-1) (contended: ceilc)");
  app.add_option("--spread", s.spread, "slot ranges of each master: names spread evenly");
  app.add_option("--start-at-ms", s.start_at_ms, "start of the window, Unix epoch milliseconds");
  app.add_flag("--batch-calls", s.batch_calls,
               "ClientOptions::batch_calls: threads' calls in batches");
  app.add_flag("--serve-cluster", serve, "start a private 3-master cluster, print it, wait");
  CLI11_PARSE(app, argc, argv);
  if (s.mode == "contended") {  // its own defaults: 4 x 16 threads queue 4 deep on each
    if (semaphores->count() == 0) s.semaphores = 16;
    if (limit->count() == 0) s.limit = 1;
    // Other names than uncontended's: a semaphore opened with another limit is refused.
    if (stem->count() == 0) s.stem = "ceilc";
  }
  try {
    return serve ? serve_cluster() : run(s);
  } catch (const std::exception& e) {
    std::cerr << "fairsem_bench_ceiling: " << e.what() << "\n";
    return 1;
  }
}
