// fairsem-guard: several workers share a FairSemaphore and run a critical section under an
// RAII guard (std::unique_lock over fairsem::SemaphoreLock). Shows the fencing tokens, the
// grant order and that no more than `limit` workers are ever inside at once.
//
//   fairsem-guard [--url URL] [--limit N] [--workers N] [--rounds N]
//
// URL defaults to $FAIRSEM_URL, then $REDIS_URL, then redis://127.0.0.1:6379.
// Exit codes: 0 ok, 64 usage error, 69 Redis unreachable or auth failed, 70 other error.

#include <fmt/format.h>
#include <fairsem/fairsem.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kExitUsage = 64;
constexpr int kExitUnavailable = 69;
constexpr int kExitInternal = 70;

int usage(const std::string& problem) {
  fmt::print(stderr, "fairsem-guard: {}\n", problem);
  fmt::print(stderr, "usage: fairsem-guard [--url URL] [--limit N] [--workers N] [--rounds N]\n");
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  std::string url = "redis://127.0.0.1:6379";
  if (const char* env = std::getenv("REDIS_URL")) url = env;
  if (const char* env = std::getenv("FAIRSEM_URL")) url = env;
  long long limit = 2;
  int workers = 5;
  int rounds = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return usage("missing value after " + arg);
    const std::string value = argv[++i];
    try {
      if (arg == "--url") {
        url = value;
      } else if (arg == "--limit") {
        limit = std::stoll(value);
      } else if (arg == "--workers") {
        workers = std::stoi(value);
      } else if (arg == "--rounds") {
        rounds = std::stoi(value);
      } else {
        return usage("unknown option " + arg);
      }
    } catch (const std::logic_error&) {
      return usage(fmt::format("{} needs a number, got \"{}\"", arg, value));
    }
  }
  if (workers < 1 || rounds < 1) return usage("--workers and --rounds must be at least 1");

  try {
    fairsem::SemaphoreOptions options;
    options.limit = limit;
    options.lease = std::chrono::seconds(5);
    options.key_prefix = "fairsem-demo";
    // A fresh name per run, so a previous run's limit never gets in the way.
    const std::string name =
        fmt::format("guard-{}", std::chrono::system_clock::now().time_since_epoch().count());
    fairsem::FairSemaphore sem(fairsem::ConnectionOptions::from_url(url), name, options);
    fmt::print("semaphore '{}': limit {}, {} workers x {} rounds, lease {} ms\n", name, limit,
               workers, rounds, options.lease.count());

    std::mutex print_mu;
    std::atomic<int> inside{0};
    std::atomic<int> most{0};
    std::vector<std::thread> threads;
    for (int w = 0; w < workers; ++w) {
      threads.emplace_back([&, w] {
        fairsem::SemaphoreLock lock(sem);
        for (int r = 0; r < rounds; ++r) {
          std::unique_lock<fairsem::SemaphoreLock> guard(lock);  // waits, first come first served
          const int now = ++inside;
          int seen = most.load();
          while (now > seen && !most.compare_exchange_weak(seen, now)) {
          }
          {
            std::lock_guard<std::mutex> p(print_mu);
            fmt::print("  worker {} holds permit with fencing token {:>3} ({} of {} in use)\n", w,
                       lock.permit().fencing_token(), now, limit);
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(40));  // the protected work
          --inside;
        }
      });
    }
    for (auto& t : threads) t.join();
    const fairsem::Status status = sem.status();
    fmt::print("{} grants, at most {} holders at once (limit {}); now {} holders, {} waiters\n",
               status.last_ticket, most.load(), limit, status.holders.size(),
               status.waiters.size());
    return most.load() <= limit ? 0 : kExitInternal;
  } catch (const fairsem::InvalidArgument& e) {
    return usage(e.what());
  } catch (const fairsem::ConnectionError& e) {
    fmt::print(stderr, "fairsem-guard: {}\n", e.what());
    return kExitUnavailable;
  } catch (const std::exception& e) {
    fmt::print(stderr, "fairsem-guard: {}\n", e.what());
    return kExitInternal;
  }
}
