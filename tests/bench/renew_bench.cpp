// One process holds 10,000 permits. Reported for a renewal round (what the watchdog does each
// interval, FairSemaphore::renew_all): script calls and Redis microseconds per round, the
// longest single call (Redis serves nobody else meanwhile), the round's wall time, and the
// client's resident memory with the permits held (and per permit, against the RSS before
// acquiring them).

#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <vector>

#include "bench_support.hpp"
#include "fairsem/fairsem.hpp"

namespace fairsem::bench {
namespace {

struct Held {
  std::int64_t rss_before = 0;
  std::int64_t rss_after = 0;
  std::unique_ptr<FairSemaphore> sem;
  std::vector<Permit> permits;
};

/// Acquired once; Google Benchmark calls the benchmark several times.
Held& held(long long count) {
  BenchRedis::instance();  // first, so it outlives the permits (they release at exit)
  static std::unique_ptr<Held> h;
  if (!h) {
    h = std::make_unique<Held>();
    h->rss_before = resident_bytes();
    SemaphoreOptions o;
    o.key_prefix = "bench";
    o.limit = count;
    o.lease = std::chrono::minutes(10);
    o.auto_renew = false;  // the benchmark renews; the watchdog would only add rounds
    h->sem = std::make_unique<FairSemaphore>(BenchRedis::instance().options(), "renew", o);
    h->permits.reserve(static_cast<std::size_t>(count));
    for (long long i = 0; i < count; ++i) {
      std::optional<Permit> p = h->sem->try_acquire();
      if (!p) throw std::runtime_error("renew benchmark: try_acquire refused below the limit");
      h->permits.push_back(std::move(*p));
    }
    h->rss_after = resident_bytes();
  }
  return *h;
}

void BM_RenewRound(benchmark::State& state) {
  const long long count = state.range(0);
  Held& h = held(count);
  detail::Connection& admin = BenchRedis::instance().admin();
  // Every call's execution time (threshold 0 µs), for the longest one: while a script runs,
  // every other client of that Redis waits.
  admin.command({"CONFIG", "SET", "slowlog-log-slower-than", "0"});
  admin.command({"CONFIG", "SET", "slowlog-max-len", "100000"});
  admin.command({"SLOWLOG", "RESET"});
  const ServerStats before = ServerStats::read(admin);
  for (auto _ : state) {
    if (h.sem->renew_all() != static_cast<std::size_t>(count)) {
      state.SkipWithError("a permit was lost during renewal");
      break;
    }
  }
  const ServerStats used = ServerStats::read(admin).since(before);
  long long longest_us = 0;
  for (const detail::Reply& e : admin.command({"SLOWLOG", "GET", "-1"}).elements) {
    // id, timestamp, duration µs, argv, ...
    if (e.elements.size() < 4 || e.elements[3].elements.empty()) continue;
    const std::string& command = e.elements[3].elements[0].str;
    if (is_script_call(command)) {
      longest_us = std::max(longest_us, e.elements[2].integer);
    }
  }
  admin.command({"CONFIG", "SET", "slowlog-log-slower-than", "10000"});
  const auto rounds = static_cast<double>(state.iterations());
  state.counters["permits"] = static_cast<double>(count);
  state.counters["script_calls_per_round"] = static_cast<double>(used.script_calls()) / rounds;
  state.counters["redis_us_per_round"] = static_cast<double>(used.script_usec()) / rounds;
  state.counters["longest_call_us"] = static_cast<double>(longest_us);
  state.counters["client_rss_MiB"] = static_cast<double>(h.rss_after) / (1024.0 * 1024.0);
  state.counters["rss_bytes_per_permit"] =
      static_cast<double>(h.rss_after - h.rss_before) / static_cast<double>(count);
}
BENCHMARK(BM_RenewRound)->Arg(10000)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fairsem::bench

BENCHMARK_MAIN();
