// Target 1: the uncontended acquire+release pair against the floor of one Redis round trip.
//
// Each benchmark times every iteration itself and reports p50/p99 in microseconds, next to
// Google Benchmark's mean, and what the server spent per iteration (commandstats: the client's
// top-level commands, their execution time, and every command including script bodies'). The
// floor benchmarks use the same client code (fairsem's hiredis connection), so the ratio
// pair / (2 x EVALSHA) shows what the semaphore adds; compare.sh sets it beside redis-benchmark.

#include <benchmark/benchmark.h>

#include <chrono>
#include <string>
#include <vector>

#include "bench_support.hpp"
#include "fairsem/fairsem.hpp"

namespace fairsem::bench {
namespace {

using Clock = std::chrono::steady_clock;

/// Times each iteration of `body`, then reports p50/p99 and the server's cost per iteration.
template <class Body>
void run_timed(benchmark::State& state, Body&& body) {
  detail::Connection& admin = BenchRedis::instance().admin();
  std::vector<double> us;
  us.reserve(1 << 16);
  const ServerStats before = ServerStats::read(admin);
  for (auto _ : state) {
    const auto start = Clock::now();
    body();
    us.push_back(micros(Clock::now() - start));
  }
  const ServerStats used = ServerStats::read(admin).since(before);
  const auto n = static_cast<double>(state.iterations());
  state.counters["p50_us"] = percentile(us, 50);
  state.counters["p99_us"] = percentile(us, 99);
  state.counters["client_cmds"] = static_cast<double>(used.client_commands()) / n;
  state.counters["redis_us"] = static_cast<double>(used.client_usec()) / n;
  state.counters["redis_cmds"] = static_cast<double>(used.total_commands) / n;
  state.counters["redis_cpu_us"] = used.cpu_seconds * 1e6 / n;
}

void BM_Ping(benchmark::State& state) {
  detail::Connection conn(BenchRedis::instance().options());
  run_timed(state, [&] { benchmark::DoNotOptimize(conn.command({"PING"})); });
}
BENCHMARK(BM_Ping)->UseRealTime();

void BM_RawEvalsha(benchmark::State& state) {
  detail::Connection conn(BenchRedis::instance().options());
  const std::string sha = conn.command({"SCRIPT", "LOAD", "return 1"}).str;
  run_timed(state, [&] { benchmark::DoNotOptimize(conn.command({"EVALSHA", sha, "0"})); });
}
BENCHMARK(BM_RawEvalsha)->UseRealTime();

SemaphoreOptions pair_options() {
  SemaphoreOptions o;
  o.limit = 1;
  o.key_prefix = "bench";
  return o;
}

void BM_TryAcquireRelease(benchmark::State& state) {
  FairSemaphore sem(BenchRedis::instance().options(), "pair-try", pair_options());
  run_timed(state, [&] {
    std::optional<Permit> p = sem.try_acquire();
    if (!p) state.SkipWithError("try_acquire failed on an idle semaphore");
    benchmark::DoNotOptimize(p->release());
  });
}
BENCHMARK(BM_TryAcquireRelease)->UseRealTime();

void BM_AcquireRelease(benchmark::State& state) {
  FairSemaphore sem(BenchRedis::instance().options(), "pair-acquire", pair_options());
  run_timed(state, [&] {
    Permit p = sem.acquire();
    benchmark::DoNotOptimize(p.release());
  });
}
BENCHMARK(BM_AcquireRelease)->UseRealTime();

// The same pair on a semaphore whose keys expire when idle (SemaphoreOptions::idle_expiry):
// every acquire finds it idle, so it gives its new keys their expiry.
void BM_AcquireReleaseIdleExpiry(benchmark::State& state) {
  SemaphoreOptions o = pair_options();
  o.idle_expiry = std::chrono::minutes(10);
  FairSemaphore sem(BenchRedis::instance().options(), "pair-expiring", o);
  run_timed(state, [&] {
    Permit p = sem.acquire();
    benchmark::DoNotOptimize(p.release());
  });
}
BENCHMARK(BM_AcquireReleaseIdleExpiry)->UseRealTime();

}  // namespace
}  // namespace fairsem::bench

BENCHMARK_MAIN();
