// The waiter-count sweep (issue 27): N asynchronous waiters of one Client on one semaphore
// with limit 1, each released as soon as it is granted, drained from the moment the holder
// releases. Per N (10, 1,000, 10,000, 100,000): the time to queue them all and to drain them
// (hand-off = drain / N), Redis CPU per grant (used_cpu_sys + used_cpu_user over the drain,
// polls included), the calls Redis took more than 1 ms for while draining (SLOWLOG at a
// threshold of 1,000 µs), and what the process used for them: threads and connections to Redis
// while they wait, and resident memory per waiter.
//
// One iteration per N: the scenario is one drain, measured whole.

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "bench_support.hpp"
#include "fairsem/fairsem.hpp"
#include "process_stats.hpp"

namespace fairsem::bench {
namespace {

using Clock = std::chrono::steady_clock;

long long connected_clients(detail::Connection& admin) {
  const std::string info = admin.command({"INFO", "clients"}).str;
  const auto at = info.find("connected_clients:");
  return at == std::string::npos ? 0 : std::stoll(info.substr(at + 18));
}

void BM_Drain(benchmark::State& state) {
  const long long waiters = state.range(0);
  detail::Connection& admin = BenchRedis::instance().admin();
  for (auto _ : state) {
    const std::string name = fmt::format("drain-{}", waiters);
    const std::vector<std::string> keys = detail::semaphore_keys("bench", name);
    admin.command({"DEL", keys[0], keys[1], keys[2], keys[3], keys[4], keys[7], keys[8]});
    const std::size_t threads_before = test::thread_count();
    const long long clients_before = connected_clients(admin);
    const std::int64_t rss_before = resident_bytes();

    Client client(BenchRedis::instance().options());
    SemaphoreOptions o;
    o.limit = 1;
    o.key_prefix = "bench";
    o.lease = std::chrono::seconds(60);  // waiters poll every 20 s
    FairSemaphore sem(client, name, o);
    std::optional<Permit> holder = sem.acquire();
    std::atomic<long long> granted{0};
    std::atomic<long long> failed{0};
    const auto queue_start = Clock::now();
    for (long long i = 0; i < waiters; ++i) {
      sem.acquire_async([&](std::exception_ptr error, std::optional<Permit> permit) {
        if (error || !permit) {
          ++failed;
        } else {
          ++granted;  // released as the callback returns: the next waiter's turn
        }
      });
    }
    // Every request queued (it holds a place in owner).
    while (admin.command({"ZCARD", keys[0]}).integer < waiters + 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const double queue_s = std::chrono::duration<double>(Clock::now() - queue_start).count();
    const std::size_t threads_waiting = test::thread_count() - threads_before;
    const long long connections_waiting = connected_clients(admin) - clients_before;
    const std::int64_t rss_waiting = resident_bytes() - rss_before;

    admin.command({"CONFIG", "SET", "slowlog-log-slower-than", "1000"});
    admin.command({"SLOWLOG", "RESET"});
    const ServerStats before = ServerStats::read(admin);
    const auto drain_start = Clock::now();
    holder.reset();
    while (granted.load() + failed.load() < waiters) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    const double drain_s = std::chrono::duration<double>(Clock::now() - drain_start).count();
    const ServerStats cost = ServerStats::read(admin).since(before);
    const long long slow = admin.command({"SLOWLOG", "LEN"}).integer;
    admin.command({"CONFIG", "SET", "slowlog-log-slower-than", "10000"});
    if (failed.load() != 0) {
      state.SkipWithError(fmt::format("{} waiters failed", failed.load()).c_str());
      break;
    }
    state.SetIterationTime(drain_s);
    state.counters["waiters"] = static_cast<double>(waiters);
    state.counters["queue_s"] = queue_s;
    state.counters["drain_s"] = drain_s;
    state.counters["handoff_us"] = drain_s * 1e6 / static_cast<double>(waiters);
    state.counters["redis_cpu_us_per_grant"] =
        cost.cpu_seconds * 1e6 / static_cast<double>(waiters);
    state.counters["script_us_per_grant"] =
        static_cast<double>(cost.script_usec()) / static_cast<double>(waiters);
    state.counters["calls_over_1ms"] = static_cast<double>(slow);
    state.counters["threads"] = static_cast<double>(threads_waiting);
    state.counters["connections"] = static_cast<double>(connections_waiting);
    state.counters["rss_bytes_per_waiter"] =
        static_cast<double>(rss_waiting) / static_cast<double>(waiters);
  }
}
BENCHMARK(BM_Drain)
    ->Arg(10)
    ->Arg(1000)
    ->Arg(10000)
    ->Arg(100000)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fairsem::bench

BENCHMARK_MAIN();
