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

namespace {

constexpr int kExitUsage = 64;
constexpr int kExitUnavailable = 69;
constexpr int kExitInternal = 70;

constexpr const char* kUsage =
    "usage: fairsem-metrics-exporter [--url URL] [--name NAME] [--limit N] [--threads T] "
    "[--seconds S]\n";

struct Options {
  std::string url = "redis://127.0.0.1:6379";
  std::string name = "metrics-demo";
  long long limit = 2;
  int threads = 4;
  double seconds = 1.0;
};

int usage(const std::string& problem) {
  fmt::print(stderr, "fairsem-metrics-exporter: {}\n{}", problem, kUsage);
  return kExitUsage;
}

bool parse_whole(const char* text, long long max, long long& out) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < 1 || value > max) return false;
  out = value;
  return true;
}

bool parse_seconds(const char* text, double& out) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !std::isfinite(value) || value <= 0 ||
      value > 3600) {
    return false;
  }
  out = value;
  return true;
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
  const Counter counters[] = {
      {"acquire_attempts", "Calls of try_acquire, acquire and the timed acquires.",
       m.acquire_attempts},
      {"grants", "Acquire calls that returned a permit.", m.grants},
      {"rejections", "try_acquire calls (or timed ones with no time left) that found no permit.",
       m.rejections},
      {"timeouts", "Timed acquire calls that gave up waiting.", m.timeouts},
      {"evictions_seen", "Acquire calls ended by an eviction of the waiter.", m.evictions_seen},
      {"errors", "Acquire calls that threw anything else.", m.errors},
      {"renewals", "Permits renewed, one per permit per renewal.", m.renewals},
      {"renewal_failures", "Failed renewals, one per permit per attempt.", m.renewal_failures},
      {"permits_lost", "Held permits found lost.", m.permits_lost},
      {"releases", "Releases that freed a held permit.", m.releases},
      {"units_granted", "Units of the permits granted (grants weighted by their units).",
       m.units_granted},
      {"units_released", "Units the releases gave back.", m.units_released},
      {"reconnects", "Connections re-established after they broke.", m.reconnects},
  };
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
  Options opt;
  if (const char* env = std::getenv("REDIS_URL")) opt.url = env;
  if (const char* env = std::getenv("FAIRSEM_URL")) opt.url = env;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      fmt::print("{}", kUsage);
      return 0;
    }
    if (arg != "--url" && arg != "--name" && arg != "--limit" && arg != "--threads" &&
        arg != "--seconds") {
      return usage("unknown option " + arg);
    }
    if (i + 1 >= argc) return usage("missing value after " + arg);
    const char* value = argv[++i];
    long long number = 0;
    bool ok = true;
    if (arg == "--url") {
      opt.url = value;
    } else if (arg == "--name") {
      opt.name = value;
    } else if (arg == "--limit") {
      ok = parse_whole(value, 1000000000, opt.limit);
    } else if (arg == "--threads") {
      ok = parse_whole(value, 1000, number);
      opt.threads = static_cast<int>(number);
    } else {
      ok = parse_seconds(value, opt.seconds);
    }
    if (!ok) return usage(fmt::format("{} does not take \"{}\"", arg, value));
  }
  try {
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
