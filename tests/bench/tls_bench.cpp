// TLS next to plaintext, side by side in one run, on one private redis-server that listens on
// both a plaintext port and a TLS-only port (certificates from tests/support/test_certs):
//   BM_Reconnect    Connection::reconnect() and one PING: what a dropped connection costs (over
//                   TLS: TCP, the handshake with the chain and name verified, and the probe
//                   PING fairsem sends after it, then the PING; plaintext: TCP and the PING)
//   BM_Pair         the uncontended try_acquire() + release() pair
//   BM_HandOff      contended hand-off: from the holder's release() to the blocked waiter's
//                   return from acquire(), on two connections of one process
// Arg 0 is plaintext, 1 TLS. Each reports p50/p99 in microseconds beside the mean.

#include <benchmark/benchmark.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "fairsem/fairsem.hpp"
#include "redis_server.hpp"
#include "test_certs.hpp"

namespace fairsem::bench {
namespace {

using Clock = std::chrono::steady_clock;

/// The server, with a plaintext port beside its TLS port.
class DualServer {
 public:
  DualServer()
      : plain_port_(test::free_loopback_port()),
        server_(test::TestCerts::get().server_tls(), {"--port", std::to_string(plain_port_)}) {}

  static DualServer& instance() {
    static DualServer server;
    return server;
  }

  ConnectionOptions options(bool tls) const {
    ConnectionOptions o = server_.options();  // TLS, with the test CA
    if (!tls) {
      o.tls = TlsOptions{};
      o.port = plain_port_;
    }
    o.command_timeout = std::chrono::seconds(30);
    return o;
  }

 private:
  int plain_port_;
  test::RedisServer server_;
};

void report(benchmark::State& state, std::vector<double>& us) {
  state.counters["p50_us"] = percentile(us, 50);
  state.counters["p99_us"] = percentile(us, 99);
  state.SetLabel(state.range(0) != 0 ? "tls" : "plaintext");
}

void BM_Reconnect(benchmark::State& state) {
  const bool tls = state.range(0) != 0;
  detail::Connection c(DualServer::instance().options(tls));
  std::vector<double> us;
  for (auto _ : state) {
    const auto start = Clock::now();
    c.reconnect();
    benchmark::DoNotOptimize(c.command({"PING"}));
    us.push_back(micros(Clock::now() - start));
  }
  report(state, us);
}
BENCHMARK(BM_Reconnect)->Arg(0)->Arg(1)->UseRealTime();

SemaphoreOptions one_permit(const std::string& prefix) {
  SemaphoreOptions o;
  o.limit = 1;
  o.key_prefix = prefix;
  return o;
}

void BM_Pair(benchmark::State& state) {
  const bool tls = state.range(0) != 0;
  FairSemaphore sem(DualServer::instance().options(tls), "pair", one_permit(tls ? "tls" : "plain"));
  std::vector<double> us;
  for (auto _ : state) {
    const auto start = Clock::now();
    std::optional<Permit> p = sem.try_acquire();
    if (!p) state.SkipWithError("try_acquire failed on an idle semaphore");
    benchmark::DoNotOptimize(p->release());
    us.push_back(micros(Clock::now() - start));
  }
  report(state, us);
}
BENCHMARK(BM_Pair)->Arg(0)->Arg(1)->UseRealTime();

void BM_HandOff(benchmark::State& state) {
  const bool tls = state.range(0) != 0;
  const std::string prefix = tls ? "tls-handoff" : "plain-handoff";
  FairSemaphore holder(DualServer::instance().options(tls), "handoff", one_permit(prefix));
  FairSemaphore waiter(DualServer::instance().options(tls), "handoff", one_permit(prefix));
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Permit> granted;  // the waiter's permit, once acquire() returned
  Clock::time_point granted_at;
  bool stop = false;
  bool go = false;  // the waiter may queue again
  std::thread t([&] {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return go || stop; });
        if (stop) return;
        go = false;
      }
      Permit p = waiter.acquire();
      const auto at = Clock::now();
      std::lock_guard<std::mutex> lock(mu);
      granted.emplace(std::move(p));
      granted_at = at;
      cv.notify_all();
    }
  });
  std::vector<double> us;
  for (auto _ : state) {
    std::optional<Permit> held = holder.try_acquire();
    if (!held) {
      state.SkipWithError("the holder could not take the free permit");
      break;
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      go = true;
    }
    cv.notify_all();
    // Untimed: wait until the waiter is queued (it then blocks on the process's wake-up path).
    while (waiter.status().waiters.empty()) std::this_thread::yield();
    const auto start = Clock::now();
    benchmark::DoNotOptimize(held->release());
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return granted.has_value(); });
    const double took = micros(granted_at - start);
    state.SetIterationTime(took / 1e6);
    us.push_back(took);
    benchmark::DoNotOptimize(granted->release());
    granted.reset();
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  cv.notify_all();
  t.join();
  report(state, us);
}
BENCHMARK(BM_HandOff)->Arg(0)->Arg(1)->UseManualTime();

}  // namespace
}  // namespace fairsem::bench

BENCHMARK_MAIN();
