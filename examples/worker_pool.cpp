// fairsem-worker-pool: threads in several processes share one upstream API that allows only
// N concurrent calls. Every call is made holding a permit of a FairSemaphore with limit N, so
// however many processes and threads there are, at most N calls are in flight at once.
//
//   fairsem-worker-pool [--url URL] [--name NAME] [--processes P] [--threads T]
//                       [--permits N] [--calls C]
//
// The parent forks P processes (before it creates any semaphore or thread); each makes its
// Client, opens the semaphore through it and runs T threads, and each thread makes C calls. The
// "API call" is a short sleep. To show the limit holds, every call counts itself in a counter
// shared by all processes (anonymous shared memory): up on entry, down on exit, and the highest
// value seen is kept. The parent prints one line and checks it:
//
//   calls=<total> max_concurrent=<highest> permits=<N>
//
// URL defaults to $FAIRSEM_URL, then $REDIS_URL, then redis://127.0.0.1:6379. NAME (default
// "rate-limited-api") names the semaphore; its limit is stored in Redis by its first user, so
// another --permits needs another --name.
// Exit codes: 0 ok, 1 the count or the limit was wrong, 64 usage error, 69 Redis unreachable
// or auth failed, 70 other error (from the first process that failed).

#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fairsem/fairsem.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "args.hpp"

namespace {

namespace args = fairsem::args;
using args::kExitInternal;
using args::kExitUnavailable;

constexpr const char* kUsage =
    "usage: fairsem-worker-pool [--url URL] [--name NAME] [--processes P] [--threads T] "
    "[--permits N] [--calls C]\n";

struct Options {
  std::string url;
  std::string name = "rate-limited-api";
  int processes = 3;
  int threads = 4;
  long long permits = 2;
  int calls = 10;
};

// Lives in memory shared by every process (mapped before fork).
struct Shared {
  std::atomic<int> in_flight{0};
  std::atomic<int> max_in_flight{0};
  std::atomic<long long> calls{0};
};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<long long>::is_always_lock_free,
              "atomics in shared memory must be lock-free to work across processes");

// A call to the rate-limited upstream, made while holding a permit.
void call_api(Shared& shared) {
  const int now = ++shared.in_flight;
  int seen = shared.max_in_flight.load();
  while (now > seen && !shared.max_in_flight.compare_exchange_weak(seen, now)) {
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the upstream's work
  --shared.in_flight;
  ++shared.calls;
}

// One process of the pool. Returns its exit code.
int run_process(const Options& opt, Shared& shared) {
  try {
    fairsem::SemaphoreOptions sem_options;
    sem_options.limit = opt.permits;
    // One Client per process: every semaphore opened through it shares its connections and
    // its watchdog thread.
    const fairsem::Client client(fairsem::ConnectionOptions::from_url(opt.url));
    fairsem::FairSemaphore sem(client, opt.name, sem_options);
    std::mutex error_mu;
    std::string error;
    int error_code = 0;
    std::vector<std::thread> threads;
    threads.reserve(static_cast<std::size_t>(opt.threads));
    for (int t = 0; t < opt.threads; ++t) {
      threads.emplace_back([&] {
        try {
          fairsem::SemaphoreLock lock(sem);  // one per thread
          for (int c = 0; c < opt.calls; ++c) {
            std::unique_lock<fairsem::SemaphoreLock> guard(lock);
            call_api(shared);
          }
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> hold(error_mu);
          if (error.empty()) {
            error = e.what();
            error_code = dynamic_cast<const fairsem::ConnectionError*>(&e) != nullptr
                             ? kExitUnavailable
                             : kExitInternal;
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    if (!error.empty()) {
      fmt::print(stderr, "fairsem-worker-pool: process {}: {}\n", ::getpid(), error);
      return error_code;
    }
    return 0;
  } catch (const fairsem::LimitMismatchError& e) {
    fmt::print(stderr, "fairsem-worker-pool: process {}: {} (use another --name)\n", ::getpid(),
               e.what());
    return kExitInternal;
  } catch (const fairsem::ConnectionError& e) {
    fmt::print(stderr, "fairsem-worker-pool: process {}: {}\n", ::getpid(), e.what());
    return kExitUnavailable;
  } catch (const std::exception& e) {
    fmt::print(stderr, "fairsem-worker-pool: process {}: {}\n", ::getpid(), e.what());
    return kExitInternal;
  }
}

/// Waits for the children, prints the line with the counts and returns the exit code: `result`
/// (the parent's own failure) if not 0, else the first failed child's, else 1 if the count or the
/// limit was wrong.
int wait_and_check(const Options& opt, const Shared& shared, const std::vector<pid_t>& children,
                   int result) {
  for (const pid_t pid : children) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : kExitInternal;
    if (WIFSIGNALED(status)) {
      fmt::print(stderr, "fairsem-worker-pool: process {} killed by signal {}\n", pid,
                 WTERMSIG(status));
    }
    if (result == 0) result = code;
  }

  const long long expected = static_cast<long long>(opt.processes) * opt.threads * opt.calls;
  const long long calls = shared.calls.load();
  const int max_in_flight = shared.max_in_flight.load();
  fmt::print("calls={} max_concurrent={} permits={}\n", calls, max_in_flight, opt.permits);
  if (result != 0) return result;
  if (calls != expected) {
    fmt::print(stderr, "fairsem-worker-pool: {} calls made, expected {}\n", calls, expected);
    return 1;
  }
  if (max_in_flight > opt.permits) {
    fmt::print(stderr, "fairsem-worker-pool: {} calls were in flight at once, limit {}\n",
               max_in_flight, opt.permits);
    return 1;
  }
  return 0;
}

/// The counters, in memory shared with the processes forked after this.
Shared& map_shared() {
  void* memory =
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    throw std::system_error(errno, std::generic_category(), "mmap of the shared counters");
  }
  return *new (memory) Shared;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Options opt;
    CLI::App app{"Threads in several processes share N permits for calls to one upstream.",
                 "fairsem-worker-pool"};
    args::add_url(app, opt.url);
    app.add_option("--name", opt.name, "Semaphore name")->capture_default_str();
    app.add_option("--processes", opt.processes, "Processes to fork")
        ->capture_default_str()
        ->transform(args::whole_number(1, 1000));
    app.add_option("--threads", opt.threads, "Threads per process")
        ->capture_default_str()
        ->transform(args::whole_number(1, 1000));
    app.add_option("--permits", opt.permits, "The semaphore's limit")
        ->capture_default_str()
        ->transform(args::whole_number(1, fairsem::kMaxLimit));
    app.add_option("--calls", opt.calls, "Calls per thread")
        ->capture_default_str()
        ->transform(args::whole_number(1, 1000000));
    if (const auto exit_code = args::parse(app, argc, argv, kUsage)) return *exit_code;
    opt.url = args::resolve_url(opt.url);
    try {
      fairsem::ConnectionOptions::from_url(opt.url);  // a bad URL is a usage error, found once
      fairsem::validate_name(opt.name, "semaphore name");
    } catch (const fairsem::InvalidArgument& e) {
      fmt::print(stderr, "fairsem-worker-pool: {}\n{}", e.what(), kUsage);
      return args::kExitUsage;
    }
    Shared& shared = map_shared();
    // Nothing buffered may be written twice by the children.
    if (std::fflush(stdout) != 0) {
      throw std::system_error(errno, std::generic_category(), "writing to stdout");
    }
    std::vector<pid_t> children;
    int result = 0;
    for (int p = 0; p < opt.processes; ++p) {
      const pid_t pid = ::fork();
      if (pid < 0) {
        fmt::print(stderr, "fairsem-worker-pool: fork of process {}: {}\n", p + 1,
                   std::generic_category().message(errno));
        result = kExitInternal;
        break;
      }
      if (pid == 0) return run_process(opt, shared);  // the child ends here, through exit()
      children.push_back(pid);
    }
    return wait_and_check(opt, shared, children, result);
  } catch (const std::exception& e) {
    fmt::print(stderr, "fairsem-worker-pool: {}\n", e.what());
    return kExitInternal;
  }
}
