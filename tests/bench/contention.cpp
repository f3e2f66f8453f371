// Target 2: C clients contend for one semaphore (limit L) and hold each permit for at least H ms,
// for S seconds; as threads of one process or as C processes. Prints one JSON line: grants/s,
// waits, hand-offs, FIFO order, and what Redis paid per grant.
//
// Every grant is recorded by the client itself, outside the library, as
//   client,ask_ns,enter_ns,release_ns,token
// on CLOCK_MONOTONIC (steady_clock; one clock for every process on the machine): ask = acquire()
// called, enter = the critical section starts, release = release() called. --external runs
// another implementation (compare.sh runs the npm peer) that writes the same records to
// --records; the analysis and the Redis figures are then the same code for both.
//
//   fairsem_contention --clients 8 --limit 1 --hold-ms 1 --seconds 10 --mode processes
//   fairsem_contention --external "node peer.mjs contention ... --out R" --records R --impl peer

#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "fairsem/fairsem.hpp"

namespace fairsem::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Record {
  std::int32_t client = 0;
  std::int64_t ask_ns = 0;
  std::int64_t enter_ns = 0;
  std::int64_t release_ns = 0;
  std::int64_t token = -1;  // -1: the implementation has no fencing token
};

struct Settings {
  std::string url;
  std::string mode = "threads";
  std::string impl = "fairsem";
  std::string name = "contention";
  std::string records_path;
  std::string external;
  int clients = 8;
  long long limit = 1;
  double hold_ms = 1;
  double seconds = 10;
  double fifo_tolerance_us = 100;
  bool check = false;
};

std::int64_t now_ns() { return Clock::now().time_since_epoch().count(); }

/// Shared between the clients (threads, or processes forked from this one): records and the
/// start barrier.
struct Shared {
  static constexpr std::size_t kCapacity = 1 << 19;
  std::atomic<std::size_t> count{0};
  std::atomic<int> ready{0};
  std::atomic<int> failed{0};
  std::atomic<std::int64_t> start_ns{0};
  Record records[kCapacity];
};

Shared* map_shared() {
  void* p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("mmap of the shared record area failed");
  return new (p) Shared();
}

/// One client: its own FairSemaphore (its own connections), then the loop.
void client_main(const Settings& s, Shared& shared, int client) {
  SemaphoreOptions o;
  o.limit = s.limit;
  o.key_prefix = "bench";
  FairSemaphore sem(ConnectionOptions::from_url(s.url), s.name, o);
  shared.ready.fetch_add(1);
  std::int64_t start = 0;
  while ((start = shared.start_ns.load()) == 0)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  while (now_ns() < start) std::this_thread::yield();
  const auto end = start + static_cast<std::int64_t>(s.seconds * 1e9);
  const auto hold = std::chrono::microseconds(static_cast<long long>(s.hold_ms * 1000));
  while (now_ns() < end) {
    Record r;
    r.client = client;
    r.ask_ns = now_ns();
    Permit p = sem.acquire();
    r.enter_ns = now_ns();
    r.token = p.fencing_token();
    std::this_thread::sleep_for(hold);
    r.release_ns = now_ns();
    p.release();
    const std::size_t i = shared.count.fetch_add(1);
    if (i < Shared::kCapacity) shared.records[i] = r;
  }
}

void run_clients(const Settings& s, Shared& shared) {
  auto start_when_ready = [&] {
    while (shared.ready.load() + shared.failed.load() < s.clients) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    shared.start_ns.store(now_ns() + 20'000'000);
  };
  if (s.mode == "threads") {
    std::vector<std::thread> threads;
    for (int c = 0; c < s.clients; ++c) {
      threads.emplace_back([&, c] {
        try {
          client_main(s, shared, c);
        } catch (const std::exception& e) {
          std::cerr << "client " << c << ": " << e.what() << "\n";
          shared.failed.fetch_add(1);
        }
      });
    }
    start_when_ready();
    for (auto& t : threads) t.join();
  } else {
    std::vector<pid_t> children;
    for (int c = 0; c < s.clients; ++c) {
      const pid_t pid = fork();
      if (pid < 0) throw std::runtime_error("fork failed");
      if (pid == 0) {
        int code = 0;
        try {
          client_main(s, shared, c);
        } catch (const std::exception& e) {
          std::cerr << "client " << c << ": " << e.what() << "\n";
          shared.failed.fetch_add(1);
          code = 1;
        }
        std::fflush(nullptr);
        _exit(code);
      }
      children.push_back(pid);
    }
    start_when_ready();
    for (pid_t pid : children) {
      int status = 0;
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) shared.failed.fetch_add(1);
    }
  }
  if (shared.failed.load() != 0) {
    throw std::runtime_error(fmt::format("{} client(s) failed", shared.failed.load()));
  }
}

void run_external(const std::string& command) {
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("the external command failed: " + command);
  }
}

std::vector<Record> read_records(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read records from " + path);
  std::vector<Record> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    Record r;
    char comma = 0;
    std::istringstream fields(line);
    fields >> r.client >> comma >> r.ask_ns >> comma >> r.enter_ns >> comma >> r.release_ns >>
        comma >> r.token;
    if (!fields) throw std::runtime_error("malformed record in " + path + ": " + line);
    out.push_back(r);
  }
  return out;
}

void write_records(const std::string& path, const std::vector<Record>& records) {
  std::ofstream out(path);
  for (const Record& r : records) {
    out << r.client << ',' << r.ask_ns << ',' << r.enter_ns << ',' << r.release_ns << ',' << r.token
        << '\n';
  }
  if (!out) throw std::runtime_error("cannot write records to " + path);
}

nlohmann::json spread(std::vector<double> v) {
  nlohmann::json j;
  j["count"] = v.size();
  j["p50"] = percentile(v, 50);
  j["p90"] = percentile(v, 90);
  j["p99"] = percentile(v, 99);
  j["p999"] = percentile(v, 99.9);
  j["max"] = v.empty() ? 0.0 : v.back();
  return j;
}

nlohmann::json analyze(const Settings& s, std::vector<Record> records, const ServerStats& used) {
  nlohmann::json j;
  j["impl"] = s.impl;
  j["scenario"] = "contention";
  j["mode"] = s.mode;
  j["clients"] = s.clients;
  j["limit"] = s.limit;
  j["hold_ms"] = s.hold_ms;
  j["seconds"] = s.seconds;
  const auto grants = static_cast<double>(records.size());
  j["grants"] = records.size();
  if (records.empty()) return j;

  std::sort(records.begin(), records.end(),
            [](const Record& a, const Record& b) { return a.enter_ns < b.enter_ns; });
  std::int64_t first = records.front().ask_ns;
  std::int64_t last = 0;
  std::vector<double> waits;
  std::vector<double> holds;
  std::map<int, long long> per_client;
  for (const Record& r : records) {
    first = std::min(first, r.ask_ns);
    last = std::max(last, r.release_ns);
    waits.push_back(static_cast<double>(r.enter_ns - r.ask_ns) / 1e3);
    holds.push_back(static_cast<double>(r.release_ns - r.enter_ns) / 1e3);
    ++per_client[r.client];
  }
  const double span = static_cast<double>(last - first) / 1e9;
  j["span_s"] = span;
  j["grants_per_s"] = grants / span;
  j["wait_us"] = spread(waits);
  j["hold_us_p50"] = percentile(holds, 50);
  long long min_grants = static_cast<long long>(records.size());
  long long max_grants = 0;
  for (int c = 0; c < s.clients; ++c) {
    const long long n = per_client.count(c) != 0 ? per_client[c] : 0;
    min_grants = std::min(min_grants, n);
    max_grants = std::max(max_grants, n);
  }
  j["per_client_grants"] = {{"min", min_grants}, {"max", max_grants}};

  // Holders at once, from the clients' own [enter, release] intervals.
  std::vector<std::pair<std::int64_t, int>> events;
  for (const Record& r : records) {
    events.emplace_back(r.enter_ns, 1);
    events.emplace_back(r.release_ns, -1);
  }
  std::sort(events.begin(), events.end());  // a release sorts before an enter at the same ns
  int inside = 0;
  int most = 0;
  for (const auto& e : events) most = std::max(most, inside += e.second);
  j["max_holders_seen"] = most;

  // Hand-off (limit 1): from the release() call of one holder to the next holder's critical
  // section, when the next holder is another client that was already waiting.
  std::vector<double> handoffs;
  long long token_inversions = 0;
  for (std::size_t i = 1; i < records.size(); ++i) {
    const Record& prev = records[i - 1];
    const Record& next = records[i];
    if (prev.token >= 0 && next.token >= 0 && s.limit == 1 && next.token < prev.token) {
      ++token_inversions;
    }
    if (s.limit == 1 && next.client != prev.client && next.ask_ns < prev.release_ns) {
      handoffs.push_back(static_cast<double>(next.enter_ns - prev.release_ns) / 1e3);
    }
  }
  j["handoff_us"] = spread(handoffs);
  j["token_order_violations"] = records.front().token >= 0 ? token_inversions : -1;

  // FIFO: a grant is out of order when it went to a client that asked more than the tolerance
  // after another client that was still waiting (granted later).
  std::vector<Record> by_ask = records;
  std::sort(by_ask.begin(), by_ask.end(),
            [](const Record& a, const Record& b) { return a.ask_ns < b.ask_ns; });
  const auto tolerance = static_cast<std::int64_t>(s.fifo_tolerance_us * 1e3);
  long long out_of_order = 0;
  for (std::size_t k = 0; k < by_ask.size(); ++k) {
    const Record& r = by_ask[k];
    for (std::size_t i = k; i-- > 0;) {
      const Record& earlier = by_ask[i];
      if (earlier.ask_ns >= r.ask_ns - tolerance) continue;
      if (earlier.enter_ns > r.enter_ns) {
        ++out_of_order;
        break;
      }
      // Requests that asked before r entered long before it: nothing earlier is still waiting.
      if (r.ask_ns - earlier.ask_ns > 60'000'000'000LL) break;
    }
  }
  j["fifo_tolerance_us"] = s.fifo_tolerance_us;
  j["fifo_violations"] = out_of_order;
  j["fifo_violation_share"] = static_cast<double>(out_of_order) / grants;

  const double hold_p50 = j["hold_us_p50"].get<double>();
  const double handoff_p50 = j["handoff_us"]["p50"].get<double>();
  const double bound = 2.0 * (s.clients - 1) * (hold_p50 + handoff_p50);
  j["worst_wait_bound_us"] = bound;
  j["worst_wait_within_bound"] = j["wait_us"]["max"].get<double>() <= bound;

  j["client_commands_per_grant"] = static_cast<double>(used.client_commands()) / grants;
  j["redis_commands_per_grant"] = static_cast<double>(used.total_commands) / grants;
  j["redis_cpu_us_per_grant"] = used.cpu_seconds * 1e6 / grants;
  j["redis_exec_us_per_grant"] = static_cast<double>(used.client_usec()) / grants;
  nlohmann::json cmds = nlohmann::json::object();
  for (const auto& [name, c] : used.commands) {
    if (name != "info") cmds[name] = static_cast<double>(c.calls) / grants;
  }
  j["commands_per_grant_by_name"] = cmds;
  return j;
}

int run(int argc, char** argv) {
  Settings s;
  CLI::App app{"fairsem contention benchmark: C clients, one semaphore, JSON figures"};
  app.add_option("--url", s.url, "Redis URL (default: FAIRSEM_BENCH_URL or a private server)");
  app.add_option("--mode", s.mode, "threads | processes")
      ->check(CLI::IsMember({"threads", "processes"}));
  app.add_option("--clients", s.clients)->check(CLI::Range(1, 512));
  app.add_option("--limit", s.limit)->check(CLI::Range(1LL, 1000000LL));
  app.add_option("--hold-ms", s.hold_ms, "each holder sleeps at least this long")
      ->check(CLI::Range(0.0, 60000.0));
  app.add_option("--seconds", s.seconds)->check(CLI::Range(0.1, 3600.0));
  app.add_option("--name", s.name, "semaphore name (key prefix 'bench')");
  app.add_option("--records", s.records_path,
                 "write (or, with --external, read) the grant records here");
  app.add_option("--external", s.external,
                 "run this command instead of fairsem clients; it writes --records");
  app.add_option("--impl", s.impl, "label for the JSON line");
  app.add_option("--fifo-tolerance-us", s.fifo_tolerance_us);
  app.add_flag("--check", s.check,
               "exit 1 unless grants > 0, holders <= limit, tokens in grant order");
  CLI11_PARSE(app, argc, argv);
  if (!s.external.empty() && s.records_path.empty()) {
    throw std::invalid_argument("--external needs --records (the file the command writes)");
  }

  if (s.url.empty()) s.url = BenchRedis::instance().url();
  detail::Connection admin(ConnectionOptions::from_url(s.url));
  const std::string base = fmt::format("bench:{{{}}}:", s.name);
  admin.command(
      {"DEL", base + "owner", base + "time", base + "counter", base + "meta", base + "info"});

  std::vector<Record> records;
  ServerStats before = ServerStats::read(admin);
  ServerStats used;
  if (!s.external.empty()) {
    run_external(s.external);
    used = ServerStats::read(admin).since(before);
    records = read_records(s.records_path);
  } else {
    Shared* shared = map_shared();
    // Connecting and opening are set-up, not per-grant cost: the clients open, then measure.
    run_clients(s, *shared);
    used = ServerStats::read(admin).since(before);
    const std::size_t n = std::min(shared->count.load(), Shared::kCapacity);
    records.assign(shared->records, shared->records + n);
    if (shared->count.load() > n) {
      std::cerr << "fairsem_contention: " << shared->count.load() - n
                << " grants were not recorded (the record area is full)\n";
    }
    if (!s.records_path.empty()) write_records(s.records_path, records);
  }
  const nlohmann::json j = analyze(s, records, used);
  std::cout << j.dump() << std::endl;
  if (s.check) {
    const bool ok = j["grants"].get<std::size_t>() > 0 &&
                    j["max_holders_seen"].get<long long>() <= s.limit &&
                    j["token_order_violations"].get<long long>() <= 0;
    if (!ok) {
      std::cerr << "FAILED: no grants, more holders than the limit, or tokens out of grant order\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace fairsem::bench

int main(int argc, char** argv) {
  try {
    return fairsem::bench::run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "fairsem_contention: " << e.what() << "\n";
    return 1;
  }
}
