// fairsem-asio-requests: one single-threaded asio::io_context serves many concurrent requests
// with C++20 coroutines, each holding a permit of a FairSemaphore while it works, and no thread
// or connection of its own while it waits (fairsem/asio.hpp).
//
//   fairsem-asio-requests [URL] [--requests N] [--limit L] [--work-ms MS] [--name NAME]
//
// Each request co_awaits fairsem::async_acquire, then an asio::steady_timer of MS ms (its
// "work"), then releases. Prints one line and checks it:
//
//   requests=<N> served=<served> max_holding=<most at once> limit=<L> threads=<T> seconds=<S>
//
// URL defaults to $FAIRSEM_URL, then $REDIS_URL, then redis://127.0.0.1:6379.
// Exit codes: 0 ok, 1 not every request was served or the limit was exceeded, 64 usage error,
// 69 Redis unreachable, 70 other error.

#include <dirent.h>
#include <fmt/format.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <fairsem/asio.hpp>
#include <fairsem/fairsem.hpp>
#include <string>
#include <string_view>

namespace {

constexpr int kExitUsage = 64;
constexpr int kExitUnavailable = 69;
constexpr int kExitInternal = 70;

struct Options {
  std::string url;
  int requests = 1000;
  long long limit = 50;
  int work_ms = 2;
  std::string name = "asio-requests";
};

int usage(const std::string& message) {
  fmt::print(stderr,
             "fairsem-asio-requests: {}\nusage: fairsem-asio-requests [URL] [--requests N] "
             "[--limit L] [--work-ms MS] [--name NAME]\n",
             message);
  return kExitUsage;
}

bool parse_number(std::string_view text, long long max, long long& out) {
  if (text.empty() || text.size() > 10) return false;
  long long n = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + (c - '0');
  }
  if (n < 1 || n > max) return false;
  out = n;
  return true;
}

std::size_t thread_count() {
  std::size_t n = 0;
  if (DIR* dir = opendir("/proc/self/task")) {
    while (const dirent* entry = readdir(dir)) n += entry->d_name[0] != '.' ? 1 : 0;
    closedir(dir);
  }
  return n;
}

std::string default_url() {
  for (const char* name : {"FAIRSEM_URL", "REDIS_URL"}) {
    if (const char* value = std::getenv(name); value != nullptr && *value != '\0') return value;
  }
  return "redis://127.0.0.1:6379";
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  opt.url = default_url();
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      fmt::print(
          "usage: fairsem-asio-requests [URL] [--requests N] [--limit L] [--work-ms MS] "
          "[--name NAME]\n");
      return 0;
    }
    if (arg.substr(0, 2) != "--") {
      opt.url = std::string(arg);
      continue;
    }
    if (i + 1 >= argc) return usage(fmt::format("{} needs a value", arg));
    const std::string_view value = argv[++i];
    long long n = 0;
    if (arg == "--name") {
      opt.name = std::string(value);
    } else if (arg == "--requests" && parse_number(value, 1000000, n)) {
      opt.requests = static_cast<int>(n);
    } else if (arg == "--limit" && parse_number(value, 1000000, n)) {
      opt.limit = n;
    } else if (arg == "--work-ms" && parse_number(value, 60000, n)) {
      opt.work_ms = static_cast<int>(n);
    } else {
      return usage(fmt::format("unknown option or bad value: {} {}", arg, value));
    }
  }
  try {
    const fairsem::Client client(fairsem::ConnectionOptions::from_url(opt.url));
    fairsem::SemaphoreOptions sem_options;
    sem_options.limit = opt.limit;
    fairsem::FairSemaphore sem(client, opt.name, sem_options);
    asio::io_context io;  // run by this thread alone
    int holding = 0;
    int most = 0;
    int served = 0;
    std::exception_ptr failure;
    const auto started = std::chrono::steady_clock::now();
    for (int r = 0; r < opt.requests; ++r) {
      asio::co_spawn(
          io,
          [&]() -> asio::awaitable<void> {
            fairsem::Permit permit = co_await fairsem::async_acquire(sem, asio::use_awaitable);
            most = std::max(most, ++holding);
            asio::steady_timer work(co_await asio::this_coro::executor,
                                    std::chrono::milliseconds(opt.work_ms));
            co_await work.async_wait(asio::use_awaitable);
            --holding;
            ++served;
          },  // the permit is released here
          [&](std::exception_ptr e) {
            if (e && !failure) failure = e;
          });
    }
    io.run();
    const std::size_t threads = thread_count();  // this one and the Client's, still running
    if (failure) std::rethrow_exception(failure);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    fmt::print("requests={} served={} max_holding={} limit={} threads={} seconds={:.2f}\n",
               opt.requests, served, most, opt.limit, threads, seconds);
    return served == opt.requests && most <= opt.limit ? 0 : 1;
  } catch (const fairsem::InvalidArgument& e) {
    return usage(e.what());
  } catch (const fairsem::ConnectionError& e) {
    fmt::print(stderr, "fairsem-asio-requests: {}\n", e.what());
    return kExitUnavailable;
  } catch (const std::exception& e) {
    fmt::print(stderr, "fairsem-asio-requests: {}\n", e.what());
    return kExitInternal;
  }
}
