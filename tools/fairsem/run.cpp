// `fairsem run`: hold a permit for as long as a command runs.
//
// Signals: INT, TERM, HUP, CHLD and USR1 are blocked before any thread exists (so every
// thread, including the library's watchdog, inherits the mask) and taken synchronously with
// sigwaitinfo() on the main thread. The acquiring thread and the on_lost callback report to
// the main thread by raising SIGUSR1 at this process. The command is started with
// posix_spawnp() with those signals unblocked and at their defaults; no shell is involved.

#include <fmt/format.h>
#include <signal.h>  // NOLINT(modernize-deprecated-headers): POSIX sigset_t, sigaction
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <variant>
#include <vector>

#include "child.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace fairsem::cli {

namespace {

constexpr const char* kCommand = "fairsem run";
// Owner info shown by `fairsem status`: the library's default (host:pid) and the start of the
// command line.
constexpr std::size_t kMaxOwnerInfo = 200;

std::atomic<bool> g_lost{false};
std::mutex g_lost_mu;
std::string g_lost_reason;

/// INT, TERM and HUP (unless this process was started with them ignored, as by nohup or a
/// shell's background job: they stay ignored, here and in the command), CHLD and USR1.
sigset_t handled_signals() {
  sigset_t set = stop_signals();
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGUSR1);
  return set;
}

/// The first of INT, TERM, HUP already pending (e.g. a Ctrl-C while connecting), or 0.
int pending_interrupt(const sigset_t& set) {
  sigset_t interrupts;
  sigemptyset(&interrupts);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    if (sigismember(&set, sig) == 1) sigaddset(&interrupts, sig);
  }
  const timespec zero{0, 0};
  const int sig = sigtimedwait(&interrupts, nullptr, &zero);
  return sig > 0 ? sig : 0;
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return fmt::format("signal {}", sig);
  }
}

/// The shell's convention: the exit code, or 128+N for death by signal N.
int exit_code_of(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return kExitInternal;
}

std::string owner_info(const std::vector<std::string>& command) {
  std::string info = default_owner_info();
  for (const std::string& word : command) {
    info += ' ';
    info += word;
    if (info.size() > kMaxOwnerInfo) {
      info.resize(kMaxOwnerInfo - 3);
      info += "...";
      break;
    }
  }
  return info;
}

void print_message(std::string_view message) {
  fmt::print(stderr, "{}: {}\n", kCommand, without_prefix(message));
}

/// What the acquiring thread hands back.
struct Acquired {
  std::optional<Permit> permit;
  std::exception_ptr error;
  std::atomic<bool> done{false};
};

/// Waits (FIFO) on a thread while the main thread stays free to take signals. Returns the
/// permit, or an exit code: 75 when not granted in time, 128+N when interrupted by signal N
/// (the queue entry is then evicted so nobody waits behind a process that is gone).
std::variant<Permit, int> acquire_interruptibly(FairSemaphore& sem, const RunArgs& args,
                                                const std::string& id, const sigset_t& set) {
  Acquired out;
  std::thread waiter([&] {
    try {
      out.permit = args.wait ? sem.try_acquire_for(args.permits, *args.wait)
                             : std::optional<Permit>(sem.acquire(args.permits));
    } catch (...) {
      out.error = std::current_exception();
    }
    out.done.store(true);
    kill(getpid(), SIGUSR1);
  });
  int interrupted = 0;
  while (!out.done.load()) {
    siginfo_t info;
    const int sig = sigwaitinfo(&set, &info);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      interrupted = sig;
      break;
    }
    // SIGUSR1: the loop condition tells; SIGCHLD: no child yet; -1: EINTR.
  }
  if (interrupted != 0) {
    print_message(
        fmt::format("{} while waiting for a permit; leaving the queue", signal_name(interrupted)));
    try {
      // Ends the waiter's acquire with EvictedError, or takes back a permit granted this very
      // moment. Until the waiter's first call has queued it there is nothing to evict: retry.
      sigset_t done_signal;
      sigemptyset(&done_signal);
      sigaddset(&done_signal, SIGUSR1);
      while (!out.done.load()) {
        (void)sem.evict(id);
        const timespec pause{0, 50'000'000};
        (void)sigtimedwait(&done_signal, nullptr, &pause);
      }
    } catch (const std::exception& e) {
      print_message(
          fmt::format("could not leave the queue ({}); the entry expires within one "
                      "lease",
                      e.what()));
      (void)std::fflush(nullptr);     // best effort: nothing is left to report a failure to
      std::_Exit(128 + interrupted);  // the waiter may stay blocked on an unreachable Redis
    }
    waiter.join();
    return 128 + interrupted;
  }
  waiter.join();
  if (out.error) {
    try {
      std::rethrow_exception(out.error);
    } catch (...) {
      return report_exception(kCommand);
    }
  }
  if (!out.permit) {
    print_message(fmt::format("not granted a permit of semaphore '{}' within {}", args.target.name,
                              format_duration(*args.wait)));
    return kExitTempFail;
  }
  return std::move(*out.permit);
}

/// Starts the command and returns its pid; nullopt (with `exit_code` set, 127 or 126) when it
/// cannot start.
std::optional<pid_t> spawn(const RunArgs& args, const Permit& permit, const sigset_t& set,
                           int& exit_code) {
  const Started started = start_command(args.command, child_environment(permit), set);
  if (started.error == 0) return started.pid;
  print_message(fmt::format("cannot run '{}': {}", args.command[0],
                            std::generic_category().message(started.error)));
  exit_code = started.error == ENOENT ? kExitNotFound : kExitCannotExecute;
  return std::nullopt;
}

/// Releases the permit and returns how; a failure is reported (the permit expires with its
/// lease) and gives nullopt.
std::optional<ReleaseResult> release_or_warn(Permit& permit, const std::string& id) {
  try {
    return permit.release();
  } catch (const std::exception& e) {
    print_message(
        fmt::format("releasing permit {} failed ({}); it expires with its lease", id, e.what()));
    return std::nullopt;
  }
}

/// The handled signals, blocked on this thread before any other starts (so every thread
/// inherits the mask), with SIGCHLD at its default.
sigset_t block_handled_signals() {
  // Started with SIGCHLD ignored, the kernel would reap the command itself and never say so.
  struct sigaction child_default {};
  child_default.sa_handler = SIG_DFL;
  sigemptyset(&child_default.sa_mask);
  sigaction(SIGCHLD, &child_default, nullptr);
  const sigset_t set = handled_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

SemaphoreOptions semaphore_options(const RunArgs& args, const std::string& id) {
  SemaphoreOptions options;
  options.limit = args.limit;
  options.lease = args.lease;
  options.key_prefix = args.target.key_prefix;
  options.permit_id = id;
  options.max_waiters = args.max_waiters;
  options.tenant = args.tenant;
  options.idle_expiry = args.idle_expiry;
  options.owner_info = owner_info(args.command);
  options.logger = [](LogLevel, std::string_view message) { print_message(message); };
  options.on_lost = [](const std::string&, const std::string& reason) {
    {
      std::lock_guard<std::mutex> lock(g_lost_mu);
      g_lost_reason = reason;
    }
    g_lost.store(true);
    kill(getpid(), SIGUSR1);
  };
  return options;
}

/// Opens the semaphore into `sem`; with --wait 0, also tries once to take the permit. Returns
/// the permit so taken (or none: acquire it next), or an exit code.
std::variant<std::optional<Permit>, int> open_semaphore(std::optional<FairSemaphore>& sem,
                                                        const RunArgs& args,
                                                        const std::string& id) {
  try {
    sem.emplace(ConnectionOptions::from_url(args.target.url), args.target.name,
                semaphore_options(args, id));
    if (!args.wait || args.wait->count() != 0) return std::optional<Permit>();
    std::optional<Permit> permit = sem->try_acquire(args.permits);
    if (!permit) {
      print_message(
          fmt::format("every permit of semaphore '{}' (limit {}) is taken or "
                      "waited for; not queueing (--wait 0)",
                      args.target.name, args.limit));
      return kExitTempFail;
    }
    return permit;
  } catch (...) {
    // With a chosen id a try_acquire whose reply was lost is not given up by the library.
    if (sem) {
      try {
        (void)sem->evict(id);
      } catch (...) {
        // Redis is unreachable: the entry, if any, expires with its lease.
      }
    }
    return report_exception(kCommand);
  }
}

/// Reports a lost permit once (the on_lost callback raised SIGUSR1) and, with --on-lost kill,
/// sends SIGTERM to the command. Returns whether it did.
bool handle_lost(const RunArgs& args, const std::string& id, pid_t child) {
  std::string reason;
  {
    std::lock_guard<std::mutex> lock(g_lost_mu);
    reason = g_lost_reason;
  }
  if (!args.kill_on_lost) {
    print_message(fmt::format("permit {} lost: {}; '{}' keeps running (--on-lost warn)", id, reason,
                              args.command[0]));
    return false;
  }
  print_message(fmt::format("permit {} lost: {}; sending SIGTERM to '{}' (pid {})", id, reason,
                            args.command[0], static_cast<long>(child)));
  kill(child, SIGTERM);
  return true;
}

/// How the command ended.
struct Ended {
  int wait_status = 0;
  bool killed_for_lost = false;  // by SIGTERM from handle_lost
};

/// Takes signals until the command ends: passes INT, TERM and HUP on and acts on a lost permit.
Ended supervise(const RunArgs& args, const std::string& id, pid_t child, const sigset_t& set) {
  Ended ended;
  bool lost_reported = false;
  for (;;) {
    siginfo_t info;
    const int sig = sigwaitinfo(&set, &info);
    if (sig == SIGCHLD) {
      const pid_t r = waitpid(child, &ended.wait_status, WNOHANG);
      if (r == child) return ended;
      if (r < 0 && errno == ECHILD) {  // reaped by someone else: its status is unknown
        ended.wait_status = kExitInternal << 8;
        return ended;
      }
    } else if (sig == SIGUSR1) {
      if (g_lost.load() && !lost_reported) {
        lost_reported = true;
        ended.killed_for_lost = handle_lost(args, id, child);
      }
    } else if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      // From the terminal (SI_KERNEL) the whole foreground process group, the command
      // included, got it already; anything sent to this process alone is passed on.
      if (info.si_code != SI_KERNEL) kill(child, sig);
    }
  }
}

}  // namespace

int run_main(const RunArgs& args) {
  const sigset_t set = block_handled_signals();  // before any thread starts

  // A chosen id, so that an interrupted wait can evict its own queue entry.
  const std::string id = "run-" + random_id();
  std::optional<FairSemaphore> sem;
  auto opened = open_semaphore(sem, args, id);
  if (const int* code = std::get_if<int>(&opened)) return *code;
  std::optional<Permit> permit = std::move(std::get<std::optional<Permit>>(opened));
  if (!permit) {
    auto outcome = acquire_interruptibly(*sem, args, id, set);
    if (const int* code = std::get_if<int>(&outcome)) return *code;
    permit = std::move(std::get<Permit>(outcome));
  }

  // A Ctrl-C (or TERM, HUP) while connecting or acquiring is not lost: nothing is started.
  if (const int sig = pending_interrupt(set)) {
    print_message(
        fmt::format("{} before the command started; releasing the permit", signal_name(sig)));
    (void)release_or_warn(*permit, id);
    return 128 + sig;
  }
  int spawn_failure = 0;
  const std::optional<pid_t> started = spawn(args, *permit, set, spawn_failure);
  if (!started) {
    (void)release_or_warn(*permit, id);
    return spawn_failure;
  }

  const Ended ended = supervise(args, id, *started, set);
  if (release_or_warn(*permit, id) == ReleaseResult::expired && !g_lost.load()) {
    print_message(fmt::format("permit {} had expired before '{}' ended (renewals failed)", id,
                              args.command[0]));
  }
  if (ended.killed_for_lost) return kExitTempFail;
  return exit_code_of(ended.wait_status);
}

}  // namespace fairsem::cli
