// Target 2: C clients contend for one semaphore (limit L) and hold each permit for at least H ms,
// for S seconds; as threads of one process or as C processes. Prints one JSON line: grants/s,
// waits, hand-offs, FIFO order, and what Redis paid per grant.
//
// Every grant is recorded by the client itself, outside the library, as
//   client,ask_ns,enter_ns,release_ns,token[,units[,slot...]]
// on CLOCK_MONOTONIC (steady_clock; one clock for every process on the machine): ask = acquire()
// called, enter = the critical section starts, release = release() called. --external runs
// another implementation (compare.sh runs the npm peer) that writes the same records to
// --records; the analysis and the Redis figures are then the same code for both.
//
// --weights W1,W2,... is the weighted scenario (issue 16): client i asks for W[i % size] units
// each time (acquire(n)), and every acquire gives up when the run ends (try_acquire_for the
// time left), so a request that is still waiting then is recorded, with enter_ns -1 and the
// time it gave up as release_ns, instead of stretching the run. Its records carry the units
// as a sixth field, then the permit's slots. Per weight it reports grants, waits, the requests
// still waiting at the end and the worst wait against the request's fair share (see by_units()
// in contention_analysis.cpp).
//
//   fairsem_contention --clients 8 --limit 1 --hold-ms 1 --seconds 10 --mode processes
//   fairsem_contention --clients 8 --limit 8 --weights 1,4 --hold-ms 1 --seconds 10
//   fairsem_contention --external "node peer.mjs contention ... --out R" --records R --impl peer
//
// This file reads the options and runs the clients; contention_settings.hpp holds the options,
// contention_record.hpp/.cpp a recorded request and the records file, contention_order.hpp/.cpp
// the FIFO, ticket and slot order checks, and contention_analysis.hpp/.cpp the JSON figures.

#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "contention_analysis.hpp"
#include "contention_record.hpp"
#include "contention_settings.hpp"
#include "fairsem/fairsem.hpp"

namespace fairsem::bench::contention {
namespace {

using Clock = std::chrono::steady_clock;

std::int64_t now_ns() { return Clock::now().time_since_epoch().count(); }

/// Shared between the clients (threads, or processes forked from this one): records and the
/// start barrier.
struct Shared {
  static constexpr std::size_t kCapacity = 1 << 19;
  std::atomic<std::size_t> count{0};
  std::atomic<int> ready{0};
  std::atomic<int> failed{0};
  std::atomic<std::int64_t> start_ns{0};
  std::array<Record, kCapacity> records;
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
  const long long units = s.units_of(client);
  auto store = [&shared](const Record& r) {
    const std::size_t i = shared.count.fetch_add(1);
    if (i < Shared::kCapacity) shared.records[i] = r;
  };
  while (now_ns() < end) {
    Record r;
    r.client = client;
    r.units = units;
    r.ask_ns = now_ns();
    if (!s.weighted()) {
      Permit p = sem.acquire();
      r.enter_ns = now_ns();
      r.token = p.fencing_token();
      std::this_thread::sleep_for(hold);
      r.release_ns = now_ns();
      p.release();
      store(r);
      continue;
    }
    // Weighted: wait no longer than the run lasts; a request still queued then is recorded as
    // such (its wait is at least the time it was queued), and the client stops.
    const std::int64_t left = end - r.ask_ns;
    if (left <= 0) break;
    std::optional<Permit> p = sem.try_acquire_for(units, std::chrono::nanoseconds(left));
    if (!p) {
      r.release_ns = now_ns();
      r.enter_ns = -1;
      store(r);
      break;
    }
    r.enter_ns = now_ns();
    r.token = p->fencing_token();
    for (const long long slot : p->slots()) r.add_slot(slot);
    if (p->count() != units || static_cast<long long>(p->slots().size()) != units) {
      throw std::runtime_error(fmt::format("asked for {} units, granted {} with {} slots", units,
                                           p->count(), p->slots().size()));
    }
    std::this_thread::sleep_for(hold);
    r.release_ns = now_ns();
    p->release();
    store(r);
  }
}

/// Lets the clients start together once every one of them is ready (or has failed).
void start_when_ready(const Settings& s, Shared& shared) {
  while (shared.ready.load() + shared.failed.load() < s.clients) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  shared.start_ns.store(now_ns() + 20'000'000);
}

void run_threads(const Settings& s, Shared& shared) {
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(s.clients));
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
  start_when_ready(s, shared);
  for (auto& t : threads) t.join();
}

void run_processes(const Settings& s, Shared& shared) {
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
      (void)std::fflush(nullptr);
      _exit(code);
    }
    children.push_back(pid);
  }
  start_when_ready(s, shared);
  for (pid_t pid : children) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) shared.failed.fetch_add(1);
  }
}

void run_clients(const Settings& s, Shared& shared) {
  if (s.mode == "threads") {
    run_threads(s, shared);
  } else {
    run_processes(s, shared);
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
  app.add_option("--fifo-tolerance-us", s.fifo_tolerance_us,
                 "an earlier request asked more than this before the grant's");
  app.add_option("--fifo-grant-tolerance-us", s.fifo_grant_tolerance_us,
                 "and was still waiting more than this after it (0: at all)");
  app.add_option("--weights", s.weights,
                 "weighted scenario: client i asks for W[i % size] units, e.g. 1,4")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  app.add_flag("--check", s.check,
               "exit 1 unless grants > 0, units held <= limit, tokens in grant order, and (with "
               "slots) no slot held twice and no grant proven out of ticket order");
  CLI11_PARSE(app, argc, argv);
  for (const long long w : s.weights) {
    if (w > s.limit) {
      throw std::invalid_argument(
          fmt::format("--weights: {} units can never be granted under limit {}", w, s.limit));
    }
  }
  if (!s.external.empty() && s.records_path.empty()) {
    throw std::invalid_argument("--external needs --records (the file the command writes)");
  }

  if (s.url.empty()) s.url = BenchRedis::instance().url();
  detail::Connection admin(ConnectionOptions::from_url(s.url));
  const std::string base = fmt::format("bench:{{{}}}:", s.name);
  // Every key of the semaphore (semaphore_core.cpp), so a rerun on the same server starts from
  // nothing: the free-slot set left without the meta beside it would not describe the slots.
  admin.command({"DEL", base + "owner", base + "time", base + "counter", base + "meta",
                 base + "info", base + "slots", base + "free"});

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
    records.assign(shared->records.begin(), shared->records.begin() + n);
    if (shared->count.load() > n) {
      std::cerr << "fairsem_contention: " << shared->count.load() - n
                << " grants were not recorded (the record area is full)\n";
    }
    if (!s.records_path.empty()) write_records(s.records_path, records, s.weighted());
  }
  const nlohmann::json j = analyze(s, records, used);
  std::cout << j.dump() << std::endl;
  if (s.check) {
    const bool ok = j["grants"].get<std::size_t>() > 0 &&
                    j["max_units_seen"].get<long long>() <= s.limit &&
                    j["token_order_violations"].get<long long>() <= 0 &&
                    j["slot_handovers_early"].get<long long>() <= 0 &&
                    j["ticket_order_proven_violations"].get<long long>() <= 0;
    if (!ok) {
      std::cerr << "FAILED: no grants, more units held than the limit, tokens out of grant order, "
                   "a slot held twice or a grant proven out of ticket order\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace fairsem::bench::contention

int main(int argc, char** argv) {
  try {
    return fairsem::bench::contention::run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "fairsem_contention: " << e.what() << "\n";
    return 1;
  }
}
