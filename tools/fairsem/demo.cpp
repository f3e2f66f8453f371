// `fairsem demo`: worker processes contend for a small limit, with a live view of who holds
// and who waits, one holder SIGKILLed midway, and a summary that checks the guarantees with
// an observer outside the library (a shared-memory log written inside the critical section).
//
// Without --url it starts a private redis-server on a free loopback port in a temp dir. Every
// fork happens while this process is still single-threaded.

#include <fmt/format.h>
#include <signal.h>  // NOLINT(modernize-deprecated-headers): POSIX sigset_t, sigtimedwait
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fairsem/fairsem.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "commands.hpp"
#include "common.hpp"
#include "demo_workers.hpp"
#include "private_redis.hpp"

namespace fairsem::cli {

namespace demo {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double seconds_between(long long from_ns, long long to_ns) {
  return static_cast<double>(to_ns - from_ns) / 1e9;
}

/// Writes all of stdout's buffer now; throws std::system_error when stdout is gone.
void flush_stdout() {
  if (std::fflush(stdout) != 0) {
    throw std::system_error(errno, std::generic_category(), "writing to stdout");
  }
}

// --- the live view -------------------------------------------------------------------------

std::string describe(const std::vector<PermitInfo>& entries, const std::string& separator) {
  std::string out;
  for (const PermitInfo& p : entries) {
    if (!out.empty()) out += separator;
    // owner info is "worker-N (pid P)"; the view shows the worker and its ticket.
    const std::string who = p.owner.substr(0, p.owner.find(' '));
    out += fmt::format("{} #{}", who, p.ticket);
  }
  return out.empty() ? "-" : out;
}

class View {
 public:
  View(bool tty, const Setup& setup, int workers, int seconds)
      : tty_(tty), setup_(setup), workers_(workers), seconds_(seconds) {}

  void event(double t, const std::string& text) {
    clear();
    fmt::print("[{:5.1f}s] {}\n", t, text);
    flush_stdout();
  }

  void frame(double t, const Status& s, const Shared& shared) {
    const std::string holders = describe(s.holders, "  ");
    const std::string waiters = describe(s.waiters, " -> ");
    if (!tty_) {
      // Plain lines: one per second is enough for a log.
      if (t < next_plain_) return;
      next_plain_ = t + 1.0;
      fmt::print("[{:5.1f}s] holding: {} | waiting: {} | grants {}\n", t, holders, waiters,
                 shared.grant_count.load());
      flush_stdout();
      return;
    }
    clear();
    const std::vector<std::string> lines = {
        fmt::format("fairsem demo: {} workers, limit {}, lease {}  [{:4.1f}s / {}s]", workers_,
                    setup_.limit, format_duration(setup_.lease), t, seconds_),
        fmt::format("  holding  {}", holders), fmt::format("  waiting  {}", waiters),
        fmt::format("  grants {}   max inside {} / {}", shared.grant_count.load(),
                    shared.max_inside.load(), setup_.limit)};
    for (const std::string& line : lines) fmt::print("\033[2K{}\n", line);
    drawn_ = static_cast<int>(lines.size());
    flush_stdout();
  }

  void clear() {
    if (tty_ && drawn_ > 0) fmt::print("\033[{}F\033[J", drawn_);
    drawn_ = 0;
  }

 private:
  bool tty_;
  const Setup& setup_;
  int workers_;
  int seconds_;
  int drawn_ = 0;
  double next_plain_ = 0;
};

std::string mark(bool ok) { return ok ? "ok" : "FAILED"; }

/// INT and TERM blocked, to be taken with sigtimedwait: a Ctrl-C ends the demo early but
/// cleanly (workers stopped, the private server removed).
sigset_t block_interrupts() {
  sigset_t interrupts;
  sigemptyset(&interrupts);
  sigaddset(&interrupts, SIGINT);
  sigaddset(&interrupts, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &interrupts, nullptr);
  return interrupts;
}

/// The semaphore (on a private redis-server without --url) and the shared memory. Returns
/// nullopt to go on, or the exit code after reporting what went wrong.
std::optional<int> prepare(const DemoArgs& args, std::optional<PrivateRedis>& redis, Setup& setup,
                           Shared*& shared) {
  try {
    SemaphoreOptions check;
    check.limit = args.limit;
    check.lease = args.lease;
    check.validate();
    if (args.url.empty()) {
      redis.emplace();
      redis->wait_until_ready();
      setup.url = redis->url();
      fmt::print("private redis-server started on {}\n", setup.url);
    } else {
      setup.url = args.url;
      (void)ConnectionOptions::from_url(setup.url);
    }
    setup.name = "demo-" + random_id().substr(0, 8);
    setup.prefix = "fairsem-demo";
    setup.limit = args.limit;
    setup.lease = args.lease;
    shared = map_shared();
    flush_stdout();  // nothing buffered may be written again by the workers
  } catch (...) {
    return report_exception(kCommand);
  }
  return std::nullopt;
}

/// Forks the workers (fewer if a fork fails: then `stop` is set) and returns their pids.
std::vector<pid_t> start_workers(const DemoArgs& args, const Setup& setup, Shared& shared) {
  std::vector<pid_t> pids;
  pids.reserve(static_cast<std::size_t>(args.workers));
  for (int i = 0; i < args.workers; ++i) {
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
      fmt::print(stderr, "{}: fork: {}\n", kCommand, std::generic_category().message(errno));
      shared.stop.store(true);
      break;
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      // INT and TERM stay blocked: a Ctrl-C reaches the whole process group, and the workers
      // are stopped by the parent through `stop` instead, after their critical section.
      worker_main(setup, shared, i);
    }
    pids.push_back(pid);
  }
  return pids;
}

/// The run as the parent sees it: the clock, the workers, and what the summary reports.
struct Run {
  Run(const DemoArgs& a, Shared& s, std::vector<pid_t> p)
      : args(a), shared(s), pids(std::move(p)) {}

  const DemoArgs& args;
  Shared& shared;
  std::vector<pid_t> pids;  // -1 for the killed worker
  long long start_ns = now_ns();
  bool interrupted = false;
  std::optional<long long> killed_at;  // when the holder was SIGKILLed
  std::string victim_id;               // its permit
  std::optional<double> reclaim_seconds;

  double elapsed() const { return seconds_between(start_ns, now_ns()); }

  /// Whether the killed holder's permit is gone from `s` (recording when, the first time).
  bool reclaimed_in(const Status& s) {
    const auto held = [&](const PermitInfo& p) { return p.id == victim_id; };
    if (!reclaim_seconds && std::none_of(s.holders.begin(), s.holders.end(), held)) {
      reclaim_seconds = seconds_between(*killed_at, now_ns());
    }
    return reclaim_seconds.has_value();
  }
};

/// SIGKILLs the first worker found holding a permit, if any.
void kill_a_holder(Run& run, View& view) {
  for (int i = 0; i < static_cast<int>(run.pids.size()); ++i) {
    WorkerSlot& slot = run.shared.workers[i];
    if (slot.state.load() != holding) continue;
    run.victim_id = slot.permit_id.data();
    const long long token = slot.token.load();
    const pid_t pid = run.pids[static_cast<std::size_t>(i)];
    kill(pid, SIGKILL);
    run.killed_at = now_ns();
    int status = 0;
    waitpid(pid, &status, 0);
    run.pids[static_cast<std::size_t>(i)] = -1;
    slot.state.store(dead);
    // It no longer runs its critical section (unless it had just left it).
    if (slot.in_section.exchange(0) == 1) run.shared.inside.fetch_sub(1);
    view.event(run.elapsed(), fmt::format("SIGKILL {} while it holds #{}: its permit stays "
                                          "taken until its lease runs out",
                                          worker_label(i), token));
    return;
  }
}

/// The workers contend for args.seconds (or until INT or TERM) while the view shows it; one
/// holder is killed halfway.
void contend(Run& run, View& view, SemaphoreAdmin& admin, const sigset_t& interrupts, bool tty) {
  while (run.elapsed() < run.args.seconds) {
    const timespec zero{0, 0};
    if (sigtimedwait(&interrupts, nullptr, &zero) > 0) {
      run.interrupted = true;
      view.event(run.elapsed(), "interrupted; stopping the workers");
      return;
    }
    if (!run.killed_at && run.elapsed() >= run.args.seconds / 2.0) kill_a_holder(run, view);
    const Status s = admin.status();
    if (run.killed_at && !run.reclaim_seconds && run.reclaimed_in(s)) {
      view.event(run.elapsed(), fmt::format("the killed holder's permit was reclaimed after "
                                            "{:.2f} s and passed to the next in line",
                                            *run.reclaim_seconds));
    }
    view.frame(run.elapsed(), s, run.shared);
    std::this_thread::sleep_for(milliseconds(tty ? 100 : 50));
  }
}

/// Stops the workers (each finishes its critical section; waiters take their grant and pass it
/// on) and waits for them. Returns `exit_code`, or 1 if it was 0 and a worker failed.
int stop_workers(const Run& run, int exit_code) {
  run.shared.stop.store(true);
  for (pid_t pid : run.pids) {
    if (pid <= 0) continue;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if ((!WIFEXITED(status) || WEXITSTATUS(status) != 0) && exit_code == 0) exit_code = 1;
  }
  return exit_code;
}

/// Ended before the lease ran out: waits (a while) for the reclaim, to report it.
void wait_for_reclaim(Run& run, SemaphoreAdmin& admin) {
  if (!run.killed_at || run.reclaim_seconds) return;
  const auto give_up = Clock::now() + run.args.lease * 2 + std::chrono::seconds(5);
  while (Clock::now() < give_up && !run.reclaimed_in(admin.status())) {
    std::this_thread::sleep_for(milliseconds(20));
  }
}

/// Prints the summary and returns the exit code: `exit_code` if not 0, else 1 if a guarantee
/// check failed, else 130 if interrupted.
int summarize(const Run& run, const std::vector<Grant>& grants,
              const std::optional<Status>& final_status, int exit_code) {
  const DemoArgs& args = run.args;
  const int violations = count_order_violations(grants, args.lease);
  const int max_inside = run.shared.max_inside.load();
  const bool safe = max_inside <= args.limit;
  const bool fair = violations == 0;
  const bool reclaimed = !run.killed_at || run.reclaim_seconds.has_value();
  const bool clean = final_status && final_status->holders.empty() && final_status->waiters.empty();
  std::map<int, long long> per_worker;
  for (const Grant& g : grants) ++per_worker[g.worker];
  long long fewest = grants.empty() ? 0 : LLONG_MAX;
  for (int i = 0; i < args.workers; ++i) fewest = std::min(fewest, per_worker[i]);

  fmt::print("\nsummary ({:.1f} s{})\n", run.elapsed(), run.interrupted ? ", interrupted" : "");
  fmt::print("  grants                     {} (fewest for one worker: {})\n", grants.size(),
             fewest);
  fmt::print("  max simultaneous holders   {} (limit {})  {}\n", max_inside, args.limit,
             mark(safe));
  fmt::print("  FIFO order violations      {}  {}\n", violations, mark(fair));
  if (!run.killed_at) {
    fmt::print("  killed holder              none ({})\n",
               run.interrupted ? "interrupted before the halfway mark" : "no holder to kill");
  } else if (run.reclaim_seconds) {
    fmt::print("  killed holder's permit     reclaimed {:.2f} s after SIGKILL (lease {})  {}\n",
               *run.reclaim_seconds, format_duration(args.lease), mark(true));
  } else {
    fmt::print("  killed holder's permit     NOT reclaimed  {}\n", mark(false));
  }
  fmt::print("  left in Redis              {}  {}\n",
             final_status ? fmt::format("{} holders, {} waiters", final_status->holders.size(),
                                        final_status->waiters.size())
                          : std::string("unknown"),
             mark(clean));
  try {
    flush_stdout();
  } catch (...) {
    if (exit_code == 0) exit_code = report_exception(kCommand);
  }
  if (exit_code == 0 && !(safe && fair && reclaimed && clean)) exit_code = 1;
  if (run.interrupted && exit_code == 0) exit_code = 130;
  return exit_code;
}

}  // namespace

int run_demo(const DemoArgs& args) {
  const sigset_t interrupts = block_interrupts();
  std::optional<PrivateRedis> redis;
  Setup setup;
  Shared* shared = nullptr;
  if (const auto exit_code = prepare(args, redis, setup, shared)) return *exit_code;

  Run run{args, *shared, start_workers(args, setup, *shared)};
  const bool tty = stdout_is_tty();
  View view(tty, setup, args.workers, args.seconds);
  fmt::print(
      "{} workers contend for semaphore '{}' (limit {}, lease {}) for {} s; one holder "
      "is SIGKILLed halfway\n",
      args.workers, setup.name, args.limit, format_duration(args.lease), args.seconds);

  int exit_code = 0;
  std::optional<SemaphoreAdmin> admin;
  try {
    admin.emplace(ConnectionOptions::from_url(setup.url), setup.name, setup.prefix);
    contend(run, view, *admin, interrupts, tty);
  } catch (...) {
    view.clear();
    exit_code = report_exception(kCommand);
  }
  exit_code = stop_workers(run, exit_code);
  view.clear();
  if (exit_code != 0 && !admin) return exit_code;

  const int grant_total = std::min(shared->grant_count.load(), kMaxGrants);
  const std::vector<Grant> grants(shared->grants.begin(), shared->grants.begin() + grant_total);
  std::optional<Status> final_status;
  try {
    wait_for_reclaim(run, *admin);
    final_status = admin->status();
  } catch (...) {
    exit_code = report_exception(kCommand);
  }
  return summarize(run, grants, final_status, exit_code);
}

}  // namespace demo

int demo_main(const DemoArgs& args) { return demo::run_demo(args); }

}  // namespace fairsem::cli
