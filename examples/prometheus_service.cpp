// fairsem-prometheus-service: a service instrumented with fairsem::prometheus. Its Client keeps
// the metrics of every semaphore it opens in a prometheus-cpp Registry, served on /metrics by
// prometheus-cpp's Exposer while the service works:
//
//   fairsem-prometheus-service [--url URL] [--prefix P] [--name NAME] [--limit N] [--threads T]
//                              [--turns K] [--listen HOST:PORT] [--start-on-stdin]
//                              [--batch-calls]
//
// It prints "metrics: http://HOST:PORT/metrics" once it serves them (with --start-on-stdin, it
// then waits for a line on stdin first, so that a scraper can be ready before the load). Then
// T threads each take a
// permit K times (waiting in line), hold it 5 ms and release it; then one thread holds every
// unit and shows the other results: a try_acquire refused, a timed acquire timed out and an
// asynchronous request cancelled. One JSON line on stdout then says what it did, as the
// metrics should count it:
//
//   {"granted":<G>,"refused":1,"timed_out":1,"cancelled":1,"error":<E>,"limit":<N>,
//    "batched_calls":<B>}
//
// (B: the semaphore's script calls that went in a batch, with --batch-calls, which turns on
// ClientOptions::batch_calls; 0 without it)
//
// and it goes on serving /metrics until its stdin closes (or SIGINT/SIGTERM), so that a
// Prometheus can scrape the final values. URL defaults to $FAIRSEM_URL, then $REDIS_URL, then
// redis://127.0.0.1:6379; P to "fairsem", NAME to "prometheus-demo", N to 2, T to 4, K to 100,
// HOST:PORT to 127.0.0.1:9464 (port 0: any free one).
// Exit codes: 0 ok, 64 usage error, 69 Redis unreachable or auth failed, 70 other error.

#include <fmt/format.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>
#include <fairsem/fairsem.hpp>
#include <fairsem/prometheus.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "args.hpp"
#include "exit_codes.hpp"

namespace {

namespace args = fairsem::args;
using namespace std::chrono_literals;

constexpr const char* kUsage =
    "usage: fairsem-prometheus-service [--url URL] [--prefix P] [--name NAME] [--limit N] "
    "[--threads T] [--turns K] [--listen HOST:PORT] [--start-on-stdin] [--batch-calls]\n";

struct Options {
  std::string url;
  std::string prefix = "fairsem";
  std::string name = "prometheus-demo";
  long long limit = 2;
  int threads = 4;
  int turns = 100;
  std::string listen = "127.0.0.1:9464";
  bool start_on_stdin = false;
  bool batch_calls = false;
};

struct Tally {
  std::atomic<long long> granted{0};
  std::atomic<long long> refused{0};
  std::atomic<long long> timed_out{0};
  std::atomic<long long> cancelled{0};
  std::atomic<long long> error{0};
};

/// `turns` permits, each waited for in line, held 5 ms and released.
void work(fairsem::FairSemaphore& sem, int turns, Tally& tally) {
  for (int i = 0; i < turns; ++i) {
    try {
      fairsem::Permit permit = sem.acquire();
      ++tally.granted;
      std::this_thread::sleep_for(5ms);  // the protected work
      permit.release();
    } catch (const fairsem::Error& e) {
      ++tally.error;
      fmt::print(stderr, "fairsem-prometheus-service: {}\n", e.what());
    }
  }
}

/// Every unit held: a try_acquire is refused, a timed acquire times out, and an asynchronous
/// request is cancelled.
void show_the_other_results(fairsem::FairSemaphore& sem, long long limit, Tally& tally) {
  fairsem::Permit all = sem.acquire(limit);
  ++tally.granted;
  if (!sem.try_acquire()) ++tally.refused;
  if (!sem.try_acquire_for(20ms)) ++tally.timed_out;
  std::promise<std::exception_ptr> ended;
  fairsem::AcquireRequest request =
      sem.acquire_async([&ended](const std::exception_ptr& error, std::optional<fairsem::Permit>) {
        ended.set_value(error);
      });
  if (request.cancel()) {
    try {
      if (const std::exception_ptr error = ended.get_future().get()) std::rethrow_exception(error);
    } catch (const fairsem::CancelledError&) {
      ++tally.cancelled;
    } catch (...) {
      ++tally.error;
    }
  }
  all.release();
}

int run(const Options& opt) {
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::Exposer exposer(opt.listen, 2);
  exposer.RegisterCollectable(registry);
  const std::vector<int> ports = exposer.GetListeningPorts();
  fmt::print("metrics: http://{}:{}/metrics\n", opt.listen.substr(0, opt.listen.rfind(':')),
             ports.empty() ? 0 : ports.front());
  (void)std::fflush(stdout);

  fairsem::ClientOptions client_options;
  client_options.metrics_observer = fairsem::prometheus_observer(registry);
  client_options.batch_calls = opt.batch_calls;
  fairsem::Client client(fairsem::ConnectionOptions::from_url(opt.url), client_options);
  fairsem::SemaphoreOptions options;
  options.limit = opt.limit;
  options.key_prefix = opt.prefix;
  fairsem::FairSemaphore sem(client, opt.name, options);
  if (opt.start_on_stdin) {
    int c = 0;
    while ((c = std::fgetc(stdin)) != EOF && c != '\n') {
    }
  }

  Tally tally;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(opt.threads));
  for (int t = 0; t < opt.threads; ++t) {
    threads.emplace_back([&] { work(sem, opt.turns, tally); });
  }
  for (auto& t : threads) t.join();
  show_the_other_results(sem, opt.limit, tally);
  fmt::print(
      "{{\"granted\":{},\"refused\":{},\"timed_out\":{},\"cancelled\":{},\"error\":{},"
      "\"limit\":{},\"batched_calls\":{}}}\n",
      tally.granted.load(), tally.refused.load(), tally.timed_out.load(), tally.cancelled.load(),
      tally.error.load(), opt.limit, sem.metrics().batched_calls);
  (void)std::fflush(stdout);
  // Serving until stdin closes.
  while (std::fgetc(stdin) != EOF) {
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Options opt;
    CLI::App app{"A service whose fairsem metrics are served to Prometheus.",
                 "fairsem-prometheus-service"};
    args::add_url(app, opt.url);
    app.add_option("--prefix", opt.prefix, "Key prefix in Redis")->capture_default_str();
    app.add_option("--name", opt.name, "Semaphore name")->capture_default_str();
    app.add_option("--limit", opt.limit, "Permits")
        ->transform(args::whole_number(1, 1000))
        ->capture_default_str();
    app.add_option("--threads", opt.threads, "Worker threads")
        ->transform(args::whole_number(1, 64))
        ->capture_default_str();
    app.add_option("--turns", opt.turns, "Permits each thread takes")
        ->transform(args::whole_number(1, 1'000'000))
        ->capture_default_str();
    app.add_option("--listen", opt.listen, "HOST:PORT to serve /metrics on (port 0: any)")
        ->capture_default_str();
    app.add_flag("--start-on-stdin", opt.start_on_stdin,
                 "Wait for a line on stdin before working (a scraper ready first)");
    app.add_flag("--batch-calls", opt.batch_calls,
                 "Send the threads' script calls in batches (ClientOptions::batch_calls)");
    if (const auto code = args::parse(app, argc, argv, kUsage)) return *code;
    opt.url = args::resolve_url(opt.url);
    return run(opt);
  } catch (const fairsem::InvalidArgument& e) {
    fmt::print(stderr, "fairsem-prometheus-service: {}\n{}", e.what(), kUsage);
    return args::kExitUsage;
  } catch (const fairsem::ConnectionError& e) {
    fmt::print(stderr, "fairsem-prometheus-service: {}\n", e.what());
    return args::kExitUnavailable;
  } catch (const std::exception& e) {
    fmt::print(stderr, "fairsem-prometheus-service: {}\n", e.what());
    return args::kExitInternal;
  }
}
