// fairsem-metrics-exporter: FairSemaphore::metrics() as a monitoring system reads it. Opens a
// semaphore, runs a short burst of work on a few threads (each takes a permit, holds it for a
// moment and releases it; some turns use try_acquire or a short timed acquire instead of
// waiting), then prints the handle's metrics in the Prometheus text exposition format, as a
// /metrics endpoint serves them:
//
//   fairsem-metrics-exporter [--url URL] [--name NAME] [--limit N] [--threads T] [--seconds S]
//
// Each counter is fairsem_<field>_total{semaphore="NAME"}; the wait histogram is
// fairsem_acquire_wait_seconds (cumulative _bucket{le="..."} lines, then _sum and _count). A real
// exporter keeps the FairSemaphore it uses and renders this text on every scrape; this one
// prints it once. On stderr, one line says how much work was done:
//
//   fairsem-metrics-exporter: work: permits=<held and released> threads=<T> seconds=<S>
//
// URL defaults to $FAIRSEM_URL, then $REDIS_URL, then redis://127.0.0.1:6379. NAME defaults to
// "metrics-demo", N (the limit, stored in Redis by the semaphore's first user) to 2, T to 4 and
// S to 1 (a decimal: 0.5 is half a second).
// Exit codes: 0 ok, 64 usage error, 69 Redis unreachable or auth failed, 70 other error. The
// metrics are printed in every case but a usage error or a semaphore that cannot be opened.

#include <fmt/format.h>
#include <fairsem/fairsem.hpp>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "args.hpp"

namespace {

namespace args = fairsem::args;
using args::kExitInternal;
using args::kExitUnavailable;
using args::kExitUsage;

constexpr const char* kUsage =
    "usage: fairsem-metrics-exporter [--url URL] [--name NAME] [--limit N] [--threads T] "
    "[--seconds S]\n";

struct Options {
  std::string url;
  std::string name = "metrics-demo";
  long long limit = 2;
  int threads = 4;
  double seconds = 1.0;
};

int usage(const std::string& problem) {
  fmt::print(stderr, "fairsem-metrics-exporter: {}\n{}", problem, kUsage);
  return kExitUsage;
}

/// A duration in seconds: a decimal number above 0, at most an hour.
std::string check_seconds(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || *end != '\0' || !std::isfinite(value) || value <= 0 ||
      value > 3600) {
    return fmt::format("\"{}\" is not a number of seconds above 0 and at most 3600", text);
  }
  return {};
}

/// A label value as the exposition format wants it: backslash, double quote and newline escaped.
std::string label_value(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

/// The metrics of one semaphore handle in the Prometheus text exposition format (version 0.0.4).
std::string exposition(const fairsem::Metrics& m, const std::string& semaphore) {
  struct Counter {
    const char* field;
    const char* help;
    std::uint64_t value;
  };
  const std::array<Counter, 15> counters = {{
      {"acquire_attempts", "Calls of try_acquire, acquire and the timed acquires.",
       m.acquire_attempts},
      {"grants", "Acquire calls that returned a permit.", m.grants},
      {"rejections", "try_acquire calls (or timed ones with no time left) that found no permit.",
       m.rejections},
      {"timeouts", "Timed acquire calls that gave up waiting.", m.timeouts},
      {"evictions_seen", "Acquire calls ended by an eviction of the waiter.", m.evictions_seen},
      {"errors", "Acquire calls that threw anything else.", m.errors},
      {"cancellations", "Asynchronous acquires ended by a cancel.", m.cancellations},
      {"renewals", "Permits renewed, one per permit per renewal.", m.renewals},
      {"renewal_failures", "Failed renewals, one per permit per attempt.", m.renewal_failures},
      {"permits_lost", "Held permits found lost.", m.permits_lost},
      {"releases", "Releases that freed a held permit.", m.releases},
      {"units_granted", "Units of the permits granted (grants weighted by their units).",
       m.units_granted},
      {"units_released", "Units the releases gave back.", m.units_released},
      {"reconnects", "Connections re-established after they broke.", m.reconnects},
      {"batched_calls", "Script calls sent in one write with others (ClientOptions::batch_calls).",
       m.batched_calls},
  }};
  const std::string label = fmt::format("semaphore=\"{}\"", label_value(semaphore));
  std::string out;
  for (const Counter& c : counters) {
    const std::string metric = fmt::format("fairsem_{}_total", c.field);
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{}{{{}}} {}\n", metric, c.help, metric,
                       metric, label, c.value);
  }
  const fairsem::Histogram& h = m.acquire_wait;
  const char* const wait = "fairsem_acquire_wait_seconds";
  out += fmt::format("# HELP {} Time from an acquire call to its grant.\n# TYPE {} histogram\n",
                     wait, wait);
  for (std::size_t i = 0; i < h.counts.size(); ++i) {
    const double bound = h.bounds_seconds[i];
    const std::string le = std::isinf(bound) ? std::string("+Inf") : fmt::format("{}", bound);
    out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", wait, label, le, h.counts[i]);
  }
  out += fmt::format("{}_sum{{{}}} {}\n{}_count{{{}}} {}\n", wait, label, h.sum_seconds, wait,
                     label, h.count);
  return out;
}

/// The work: permits taken and released until `until`, mostly by waiting in the queue.
void work(fairsem::FairSemaphore& sem, std::chrono::steady_clock::time_point until,
          std::atomic<long long>& done) {
  for (int turn = 0; std::chrono::steady_clock::now() < until; ++turn) {
    std::optional<fairsem::Permit> permit;
    if (turn % 4 == 1) {
      permit = sem.try_acquire();
    } else if (turn % 4 == 2) {
      permit = sem.try_acquire_for(std::chrono::milliseconds(5));
    } else {
      permit = sem.acquire();
    }
    if (!permit) continue;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the protected work
    permit->release();
    ++done;
  }
}

int run(const Options& opt) {
  fairsem::SemaphoreOptions options;
  options.limit = opt.limit;
  fairsem::FairSemaphore sem(fairsem::ConnectionOptions::from_url(opt.url), opt.name, options);
  std::atomic<long long> done{0};
  std::mutex error_mu;
  std::string error;
  int code = 0;
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(opt.seconds));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(opt.threads));
  for (int t = 0; t < opt.threads; ++t) {
    threads.emplace_back([&] {
      try {
        work(sem, until, done);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (error.empty()) {
          error = e.what();
          code = dynamic_cast<const fairsem::ConnectionError*>(&e) != nullptr ? kExitUnavailable
                                                                              : kExitInternal;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  fmt::print("{}", exposition(sem.metrics(), opt.name));
  fmt::print(stderr, "fairsem-metrics-exporter: work: permits={} threads={} seconds={}\n",
             done.load(), opt.threads, opt.seconds);
  if (!error.empty()) fmt::print(stderr, "fairsem-metrics-exporter: {}\n", error);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Options opt;
    CLI::App app{"Prints a semaphore handle's metrics in the Prometheus text format.",
                 "fairsem-metrics-exporter"};
    args::add_url(app, opt.url);
    app.add_option("--name", opt.name, "Semaphore name")->capture_default_str();
    app.add_option("--limit", opt.limit, "The semaphore's limit")
        ->capture_default_str()
        ->transform(args::whole_number(1, fairsem::kMaxLimit));
    app.add_option("--threads", opt.threads, "Threads doing the work")
        ->capture_default_str()
        ->transform(args::whole_number(1, 1000));
    app.add_option("--seconds", opt.seconds, "How long the work runs (a decimal: 0.5 is half)")
        ->capture_default_str()
        ->check(CLI::Validator(check_seconds, "SECONDS"));
    if (const auto exit_code = args::parse(app, argc, argv, kUsage)) return *exit_code;
    opt.url = args::resolve_url(opt.url);
    return run(opt);
  } catch (const fairsem::InvalidArgument& e) {
    return usage(e.what());
  } catch (const fairsem::LimitMismatchError& e) {
    fmt::print(stderr, "fairsem-metrics-exporter: {} (use another --name)\n", e.what());
    return kExitInternal;
  } catch (const fairsem::ConnectionError& e) {
    fmt::print(stderr, "fairsem-metrics-exporter: {}\n", e.what());
    return kExitUnavailable;
  } catch (const std::exception& e) {
    fmt::print(stderr, "fairsem-metrics-exporter: {}\n", e.what());
    return kExitInternal;
  }
}
