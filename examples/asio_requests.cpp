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
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "args.hpp"

namespace {

namespace args = fairsem::args;
using args::kExitInternal;
using args::kExitUnavailable;
using args::kExitUsage;

constexpr const char* kUsage =
    "usage: fairsem-asio-requests [URL] [--requests N] [--limit L] [--work-ms MS] [--name NAME]\n";

struct Options {
  std::string url;
  int requests = 1000;
  long long limit = 50;
  int work_ms = 2;
  std::string name = "asio-requests";
};

int usage(const std::string& message) {
  fmt::print(stderr, "fairsem-asio-requests: {}\n{}", message, kUsage);
  return kExitUsage;
}

/// The threads of this process (0 where /proc cannot tell).
std::size_t thread_count() {
  std::size_t n = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/self/task", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++n;
  }
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Options opt;
    CLI::App app{"One asio thread serves many requests, each holding a permit while it works.",
                 "fairsem-asio-requests"};
    args::add_url(app, opt.url, "URL");
    app.add_option("--requests", opt.requests, "Requests to serve")
        ->capture_default_str()
        ->transform(args::whole_number(1, 1000000));
    app.add_option("--limit", opt.limit, "The semaphore's limit")
        ->capture_default_str()
        ->transform(args::whole_number(1, 1000000));
    app.add_option("--work-ms", opt.work_ms, "Milliseconds each request works")
        ->capture_default_str()
        ->transform(args::whole_number(1, 60000));
    app.add_option("--name", opt.name, "Semaphore name")->capture_default_str();
    if (const auto exit_code = args::parse(app, argc, argv, kUsage)) return *exit_code;
    opt.url = args::resolve_url(opt.url);
    // Made before the semaphore, so destroyed after it: the semaphore's destructor waits for
    // the worker threads still posting completions to it.
    asio::io_context io;  // run by this thread alone
    const fairsem::Client client(fairsem::ConnectionOptions::from_url(opt.url));
    fairsem::SemaphoreOptions sem_options;
    sem_options.limit = opt.limit;
    fairsem::FairSemaphore sem(client, opt.name, sem_options);
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
