// fairsem-guard: the smallest critical section under a distributed semaphore. At most
// `limit` processes, on any machine sharing the Redis, are inside the braces at once; the
// permit is released when the guard leaves scope, even by an exception.
//
//   fairsem-guard [URL]
//
// URL defaults to $FAIRSEM_URL, then $REDIS_URL, then redis://127.0.0.1:6379.
// Exit codes: 0 ok, 64 usage error, 69 Redis unreachable or auth failed, 70 other error.

#include <fmt/format.h>
#include <fairsem/fairsem.hpp>

#include <mutex>
#include <string>

#include "args.hpp"

namespace args = fairsem::args;

int main(int argc, char** argv) {
  try {
    CLI::App app{"The smallest critical section under a distributed semaphore.", "fairsem-guard"};
    std::string url;
    args::add_url(app, url, "URL");
    if (const auto exit_code = args::parse(app, argc, argv, "usage: fairsem-guard [URL]\n")) {
      return *exit_code;
    }
    url = args::resolve_url(url);
    fairsem::SemaphoreOptions opts;
    opts.limit = 2;  // stored in Redis by the first user; every user must agree
    fairsem::FairSemaphore sem(fairsem::ConnectionOptions::from_url(url), "guard-demo", opts);
    fairsem::SemaphoreLock lock(sem);
    {
      std::unique_lock<fairsem::SemaphoreLock> guard(lock);  // waits for a permit, FIFO
      // The critical section. Hand the fencing token to whatever you write, so it can refuse
      // a holder whose lease ran out (see examples/migration_job.cpp).
      fmt::print("inside the critical section with fencing token {}\n",
                 lock.permit().fencing_token());
    }  // released here
    return 0;
  } catch (const fairsem::ConnectionError& e) {
    fmt::print(stderr, "fairsem-guard: {}\n", e.what());
    return args::kExitUnavailable;
  } catch (const std::exception& e) {
    fmt::print(stderr, "fairsem-guard: {}\n", e.what());
    return args::kExitInternal;
  }
}
