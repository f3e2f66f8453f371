// `fairsem demo`: worker processes contend for a small limit, with a live view of who holds
// and who waits, one holder SIGKILLed midway, and a summary that checks the guarantees with
// an observer outside the library (a shared-memory log written inside the critical section).
//
// Without --url it starts a private redis-server on a free loopback port in a temp dir. Every
// fork happens while this process is still single-threaded.

#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>  // NOLINT(modernize-deprecated-headers): POSIX sigset_t, sigaction
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fairsem/fairsem.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "commands.hpp"
#include "common.hpp"

namespace fairsem::cli {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kCommand = "fairsem demo";
constexpr int kMaxWorkers = 64;
constexpr int kMaxGrants = 1 << 16;
constexpr std::size_t kIdBytes = 48;
// Two waiters promoted by releases a moment apart may start their critical sections in either
// order: each first wakes up and runs one script call, which on a loaded machine can take
// tens of ms. Grants closer than a quarter of the lease (at least this) are not compared.
constexpr auto kMinOrderSlack = milliseconds(20);

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

double seconds_between(long long from_ns, long long to_ns) {
  return static_cast<double>(to_ns - from_ns) / 1e9;
}

// --- the observer: shared memory written by the workers, read by the parent -----------------

enum WorkerState : int { idle = 0, waiting = 1, holding = 2, dead = 3 };

struct Grant {
  long long token;
  long long enter_ns;
  int worker;
};

struct WorkerSlot {
  std::atomic<int> state;
  std::atomic<long long> token;
  std::atomic<long long> grants;
  std::atomic<int> in_section;  // 1 while inside; whoever resets it decrements Shared::inside
  std::array<char, kIdBytes> permit_id;  // written before state becomes holding; '\0'-ended
};

struct Shared {
  std::atomic<bool> stop;
  std::atomic<int> inside;  // workers inside the critical section right now
  std::atomic<int> max_inside;
  std::atomic<int> grant_count;
  std::array<WorkerSlot, kMaxWorkers> workers;
  std::array<Grant, kMaxGrants> grants;
};

static_assert(std::atomic<long long>::is_always_lock_free, "shared-memory atomics");

Shared* map_shared() {
  void* p =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap");
  return new (p) Shared{};  // zeroed by the kernel; placement-new gives the atomics their life
}

// --- a private redis-server ----------------------------------------------------------------

int free_loopback_port() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int saved = errno;
    close(fd);
    throw std::system_error(saved, std::generic_category(), "bind to 127.0.0.1:0");
  }
  close(fd);
  return ntohs(addr.sin_port);
}

class PrivateRedis {
 public:
  PrivateRedis() {
    std::string dir_template = "/tmp/fairsem-demo-XXXXXX";
    if (mkdtemp(dir_template.data()) == nullptr) {
      throw std::system_error(errno, std::generic_category(), "mkdtemp");
    }
    dir_ = dir_template;
    try {
      start();
    } catch (...) {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
      throw;
    }
  }

  void start() {
    port_ = free_loopback_port();
    std::vector<std::string> args = {
        "redis-server", "--port",    std::to_string(port_), "--bind", "127.0.0.1",
        "--save",       "",          "--appendonly",        "no",     "--dir",
        dir_,           "--logfile", dir_ + "/redis.log"};
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) throw std::system_error(errno, std::generic_category(), "fork");
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlives the demo
      if (getppid() != parent) _exit(126);
      setpgid(0, 0);  // a Ctrl-C on the terminal is the demo's to handle, not the server's
      sigset_t none;
      sigemptyset(&none);
      pthread_sigmask(SIG_SETMASK, &none, nullptr);
      execvp(argv[0], argv.data());
      _exit(errno == ENOENT ? 127 : 126);
    }
    url_ = fmt::format("redis://127.0.0.1:{}", port_);
  }
  ~PrivateRedis() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  PrivateRedis(const PrivateRedis&) = delete;
  PrivateRedis& operator=(const PrivateRedis&) = delete;

  /// Waits until the server answers (called once constructed, so a failure still cleans up).
  void wait_until_ready() {
    const auto give_up = Clock::now() + std::chrono::seconds(10);
    for (;;) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw ConnectionError(
            WIFEXITED(status) && WEXITSTATUS(status) == 127
                ? std::string("redis-server was not found in PATH; install the Debian package "
                              "redis-server, or pass --url")
                : fmt::format("the private redis-server exited at start ({})", log_tail()));
      }
      try {
        ConnectionOptions o = ConnectionOptions::from_url(url_);
        o.reconnect_attempts = 1;
        (void)SemaphoreAdmin(o, "ping");  // connects: the server is up
        return;
      } catch (const ConnectionError&) {
        if (Clock::now() > give_up) {
          throw ConnectionError(
              fmt::format("the private redis-server on {} did not answer "
                          "within 10 s ({})",
                          url_, log_tail()));
        }
        std::this_thread::sleep_for(milliseconds(20));
      }
    }
  }

  const std::string& url() const noexcept { return url_; }

 private:
  std::string log_tail() const {
    std::ifstream log(dir_ + "/redis.log");
    if (!log) return "no log";
    std::string text;
    for (std::string line; std::getline(log, line);) text = line;  // the last line
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    return text.empty() ? "empty log" : text;
  }

  std::string dir_;
  std::string url_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// --- the workers -----------------------------------------------------------------------------

struct Setup {
  std::string url;
  std::string name;
  std::string prefix;
  long long limit = 0;
  milliseconds lease{0};
};

/// Writes all of stdout's buffer now; throws std::system_error when stdout is gone.
void flush_stdout() {
  if (std::fflush(stdout) != 0) {
    throw std::system_error(errno, std::generic_category(), "writing to stdout");
  }
}

/// `id` into `slot`, cut to fit, '\0'-ended.
void store_id(std::array<char, kIdBytes>& slot, std::string_view id) {
  const std::size_t n = std::min(id.size(), slot.size() - 1);
  std::copy_n(id.begin(), n, slot.begin());
  slot[n] = '\0';
}

std::string worker_label(int index) { return fmt::format("worker-{}", index + 1); }

/// A worker process: think, wait in line, hold for a while, release; until told to stop.
[[noreturn]] void worker_main(const Setup& setup, Shared& shared, int index) {
  int code = 0;
  try {
    SemaphoreOptions o;
    o.limit = setup.limit;
    o.lease = setup.lease;
    o.key_prefix = setup.prefix;
    o.owner_info = fmt::format("{} (pid {})", worker_label(index), static_cast<long>(getpid()));
    o.logger = [](LogLevel, std::string_view) {};  // the view shows what matters
    FairSemaphore sem(ConnectionOptions::from_url(setup.url), setup.name, o);
    std::mt19937 rng(static_cast<unsigned>(getpid()));
    std::uniform_int_distribution<int> think(30, 250);
    std::uniform_int_distribution<int> hold(150, 600);
    WorkerSlot& slot = shared.workers[index];
    while (!shared.stop.load()) {
      std::this_thread::sleep_for(milliseconds(think(rng)));
      slot.state.store(waiting);
      Permit p = sem.acquire();
      if (shared.stop.load()) break;  // granted after the end: pass it straight on
      store_id(slot.permit_id, p.id());
      slot.token.store(p.fencing_token());
      const int inside = shared.inside.fetch_add(1) + 1;
      slot.in_section.store(1);
      int seen = shared.max_inside.load();
      while (inside > seen && !shared.max_inside.compare_exchange_weak(seen, inside)) {
      }
      const int n = shared.grant_count.fetch_add(1);
      if (n < kMaxGrants) shared.grants[n] = Grant{p.fencing_token(), now_ns(), index};
      slot.grants.fetch_add(1);
      slot.state.store(holding);
      std::this_thread::sleep_for(milliseconds(hold(rng)));  // the critical section
      slot.state.store(idle);
      if (slot.in_section.exchange(0) == 1) shared.inside.fetch_sub(1);
      (void)p.release();
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: {}: {}\n", kCommand, worker_label(index), e.what());
    code = 1;
  }
  shared.workers[index].state.store(idle);
  if (std::fflush(nullptr) != 0) code = 1;  // its output is lost: a failure too
  _exit(code);
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

/// Grants that entered their critical section while a lower ticket, granted later by more
/// than the slack, was still waiting: the server promotes in ticket order, so this counts
/// overtaking as an outside observer sees it.
int count_order_violations(std::vector<Grant> grants, milliseconds lease) {
  std::sort(grants.begin(), grants.end(),
            [](const Grant& a, const Grant& b) { return a.token < b.token; });
  const long long slack =
      std::chrono::nanoseconds(std::max<milliseconds>(kMinOrderSlack, lease / 4)).count();
  int violations = 0;
  long long latest_earlier = 0;  // the latest entry among lower tickets
  for (const Grant& g : grants) {
    if (latest_earlier - g.enter_ns > slack) ++violations;
    latest_earlier = std::max(latest_earlier, g.enter_ns);
  }
  return violations;
}

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

int demo_main(const DemoArgs& args) {
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

}  // namespace fairsem::cli
