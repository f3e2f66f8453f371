// fairsem_stress: P worker processes x T threads loop acquire -> critical section -> release on
// one semaphore with limit L units, each request asking for one of the --weights units (some
// giving part of them back half way through), for S seconds, against a private redis-server
// (appendonly, appendfsync always), while the driver injects faults at random moments: SIGKILL
// and SIGSTOP of workers, Redis restarts, CLIENT KILL (of every client, or of the wake-up
// connections), SCRIPT FLUSH, and network faults through a proxy. Requests are blocking and
// asynchronous (futures, and callbacks of which some are cancelled) side by side. Every
// critical section, and every timed wait that gave up, is logged to shared memory; afterwards
// checker.cpp proves the promises from that log alone, counted in units, and the driver checks
// that nothing is left in Redis.
//
//   fairsem_stress --seconds 60 --processes 4 --threads 4 --limit 4 --weights 1,2,3 --faults all
//
// With --cluster the server is a 3-master Redis Cluster with a replica each, the workers run
// with min_replicas 1, and the faults include the semaphore's master hung, killed and failed
// over (driver_cluster.cpp); after each of those some request must be granted again.
//
// --batched-processes N: the last N worker processes run with ClientOptions::batch_calls (their
// threads' calls sent in batches), beside the others.
//
// --tenants N [--tenant-weights 1,2,1]: each thread names one of N tenants (fair shares between
// them); the checker holds FIFO within each tenant and reports each one's share of the held
// unit-time. --previous-release 0.4.0 --upgrade-at-s S: the previous processes run clients of
// 0.4.0, and S seconds in the semaphore is upgraded to tenants' data model under them.
//
// Exit status 0 when every check held and every requested fault was injected, 1 otherwise.
//
// This file is the command line; the worker process is in stress_worker.cpp, the driver in
// driver.cpp (the run), driver_faults.cpp and driver_cluster.cpp (the faults) and
// driver_report.cpp (the checks and the summary).

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

#include "driver.hpp"
#include "shared_log.hpp"
#include "stress_worker.hpp"

int main(int argc, char** argv) {
  using namespace fairsem::stress;
  if (argc == 5 && std::string(argv[1]) == "--worker") {
    try {
      return worker_main(std::stoi(argv[2]), std::stoi(argv[3]), argv[4]);
    } catch (const std::exception& e) {
      fmt::print(stderr, "fairsem_stress worker: {}\n", e.what());
      return 1;
    }
  }
  Settings s;
  CLI::App app{
      "fairsem_stress: a randomized stress and fault-injection run, checked by an "
      "independent observer"};
  app.add_option("--processes", s.processes, "worker processes")
      ->check(CLI::Range(1, kMaxProcesses));
  app.add_option("--threads", s.threads, "threads per worker")->check(CLI::Range(1, kMaxThreads));
  app.add_option("--limit", s.limit, "units")->check(CLI::Range(1LL, 1000LL));
  app.add_option("--weights", s.weights,
                 "the units a request asks for: one of these at random, each at most the limit")
      ->delimiter(',')
      ->check(CLI::Range(1, kMaxUnits));
  app.add_option("--partial-percent", s.partial_percent,
                 "sections of 2 units or more that give some back half way through")
      ->check(CLI::Range(0, 100));
  app.add_option("--seconds", s.seconds, "length of the load")->check(CLI::Range(1.0, 86400.0));
  app.add_option("--lease-ms", s.lease_ms, "lease")->check(CLI::Range(100, 60000));
  app.add_option("--hold-us", s.hold_us, "longest critical section")->check(CLI::Range(0, 1000000));
  app.add_option("--max-timeout-ms", s.max_timeout_ms, "longest try_acquire_for timeout")
      ->check(CLI::Range(0, 60000));
  app.add_option("--faults", s.faults,
                 fmt::format("all, none, or a comma list of: {}", fmt::join(kFaultKinds, ",")));
  app.add_option("--fault-interval-ms", s.fault_interval_ms, "mean time between faults")
      ->check(CLI::Range(50, 600000));
  app.add_option("--grants", s.grants, "end the load after this many grants (within --seconds)");
  app.add_option("--max-grants", s.max_grants, "size of the observer's log")
      ->check(CLI::Range(std::uint64_t{1000}, std::uint64_t{100'000'000}));
  app.add_option("--order-slack-ms", s.order_slack_ms,
                 "how much later than a higher token a lower one may enter")
      ->check(CLI::Range(0, 60000));
  app.add_option("--wake-bound-ms", s.wake_bound_ms,
                 "how long after its units were free a blocking grant may come, outside faults "
                 "(0: half a poll interval, lease / 6)")
      ->check(CLI::Range(0, 60000));
  app.add_option("--seed", s.seed, "random seed (0: random)");
  app.add_flag("--cluster", s.cluster,
               fmt::format("run on a 3-master Redis Cluster with a replica each (workers on "
                           "min_replicas 1); faults: {}",
                           fmt::join(kClusterFaultKinds, ",")));
  app.add_option("--previous-processes", s.previous_processes,
                 "worker processes that run clients of the previous release (a rolling upgrade)")
      ->check(CLI::Range(0, kMaxProcesses));
  app.add_option("--batched-processes", s.batched_processes,
                 "worker processes (the last ones) whose Client batches its calls (batch_calls)")
      ->check(CLI::Range(0, kMaxProcesses));
  app.add_option("--previous-release", s.previous_release,
                 "the release the previous processes run (tests/integration/previous_release/)");
  app.add_option("--tenants", s.tenants,
                 "each thread of this release names one of this many tenants")
      ->check(CLI::Range(0, kMaxTenants));
  app.add_option("--tenant-weights", s.tenant_weights, "the tenants' weights (default 1 each)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1000));
  app.add_option("--upgrade-at-s", s.upgrade_at_s,
                 "seconds into the load when the semaphore is upgraded to tenants' data model "
                 "under the previous processes (0.4.0 or later; 0: never)")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--upgrade-by", s.upgrade_by,
                 "tenant (threads name their tenants from then on) or weight (the driver stores "
                 "the weights first)");
  CLI11_PARSE(app, argc, argv);
  try {
    Driver driver(s);
    return driver.run();
  } catch (const CLI::Error& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    fmt::print(stderr, "fairsem_stress: {}\n", e.what());
    return 1;
  }
}
