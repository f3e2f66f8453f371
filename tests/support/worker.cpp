// fairsem_test_worker: a separate client process for the multi-process tests
// (tests/integration/process_test.cpp), so a test can SIGKILL or SIGSTOP a holder, or run one
// under a faked clock (libfaketime).
//
// Usage:
//   fairsem_test_worker --url URL --prefix PREFIX --name NAME --limit L --lease-ms MS
//                       [--renew-ms MS] [--owner INFO] MODE [MODE OPTIONS]
//
// Every mode first prints "CLOCK <system_clock ms since the epoch> <pid>", so a test can see
// which wall clock the worker has (libfaketime shifts it).
//
// Modes:
//   hold [--fence KEY]
//           acquire() one permit (queueing as long as it takes), print
//           "GRANTED <id> <token> <slot>", then read stdin: each line "write" writes the
//           worker's owner info to the toy fenced store KEY (tests/support/fenced_store.hpp)
//           with the permit's slot and token and prints "WRITE accepted" or "WRITE refused";
//           at EOF, release and print "RELEASED <result>" (released | expired |
//           already_released). on_lost prints "LOST <id> <reason>".
//   wait    the same as hold; the name says the test expects it to queue first (a test sees
//           the queue entry through status(); acquire() cannot tell when it is queued).
//   cycle --threads T --grants G --observer KEY --violations KEY
//           T threads each acquire G permits one after another. Inside each critical section
//           the thread INCRs KEY (on its own connection, not the semaphore's), INCRs the
//           violations key if the result exceeds the limit, holds 0-300 us, DECRs KEY and
//           releases. Prints "DONE grants=<n> max=<highest INCR result seen> violations=<n>
//           expired=<releases that found the permit gone>".
//   exit-in-callback
//           main opens the semaphore (and so its Client) for one asynchronous acquire only,
//           and returns as soon as that acquire's callback has released its permit and printed
//           "CALLED": the callback's copy of the semaphore, the last reference to the Client,
//           is let go of on a worker thread while the process exits. Prints "EXITING" first.
//   exit-after-callback
//           the same, but main returns only once the worker thread that let go of the Client
//           has torn it down and parked itself: fairsem's exit handler joins it.
//   exit-while-parking
//           the same as exit-in-callback, but an exit handler of the worker's own, which runs
//           after fairsem's, waits until the callback's thread has ended: that thread, tearing
//           the Client down, parks after fairsem's handler ran, and ends while the process
//           exits.
//
// Every output line is written with one write(2) (atomic on a pipe), so lines from different
// threads never interleave. Exit status: 0 done, 2 bad usage, 3 an exception (also printed as
// "ERROR <what>").

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fairsem/connection_options.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/threads/thread_reaper.hpp"
#include "fairsem/semaphore.hpp"
#include "fenced_store.hpp"

namespace {

std::mutex g_out_mu;

void emit(const std::string& text) {
  std::string line = text;
  line.push_back('\n');
  std::lock_guard<std::mutex> lock(g_out_mu);
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(STDOUT_FILENO, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // the test went away; nothing to report to
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "fairsem_test_worker: %s\n"
               "usage: fairsem_test_worker --url URL --prefix PREFIX --name NAME --limit L "
               "--lease-ms MS [--renew-ms MS] [--owner INFO] hold|wait|cycle [--fence KEY] "
               "[--threads T --grants G --observer KEY --violations KEY]\n",
               why.c_str());
  std::exit(2);
}

long long to_number(const std::string& flag, const std::string& value) {
  try {
    std::size_t used = 0;
    const long long n = std::stoll(value, &used);
    if (used != value.size()) throw std::invalid_argument(value);
    return n;
  } catch (const std::exception&) {
    usage(flag + " needs a number, got '" + value + "'");
  }
}

struct Args {
  std::map<std::string, std::string> flags;  // "--url" -> value
  std::string mode;
};

Args parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--", 0) == 0) {
      if (i + 1 >= argc) usage(arg + " needs a value");
      args.flags[arg] = argv[++i];
    } else if (args.mode.empty()) {
      args.mode = arg;
    } else {
      usage("unexpected argument '" + arg + "'");
    }
  }
  if (args.mode.empty()) usage("no mode given");
  return args;
}

const std::string& required(const Args& args, const std::string& flag) {
  const auto it = args.flags.find(flag);
  if (it == args.flags.end()) usage("missing " + flag);
  return it->second;
}

fairsem::ConnectionOptions connection_options(const Args& args) {
  fairsem::ConnectionOptions opts = fairsem::ConnectionOptions::from_url(required(args, "--url"));
  // As generous as the tests' own options: sanitizer builds are slow.
  opts.connect_timeout = std::chrono::seconds(2);
  opts.command_timeout = std::chrono::seconds(5);
  opts.reconnect_backoff_min = std::chrono::milliseconds(10);
  opts.reconnect_backoff_max = std::chrono::milliseconds(200);
  return opts;
}

fairsem::SemaphoreOptions semaphore_options(const Args& args) {
  fairsem::SemaphoreOptions opts;
  opts.key_prefix = required(args, "--prefix");
  opts.limit = to_number("--limit", required(args, "--limit"));
  opts.lease = std::chrono::milliseconds(to_number("--lease-ms", required(args, "--lease-ms")));
  if (const auto it = args.flags.find("--renew-ms"); it != args.flags.end()) {
    opts.renew_interval = std::chrono::milliseconds(to_number("--renew-ms", it->second));
  }
  if (const auto it = args.flags.find("--owner"); it != args.flags.end()) {
    opts.owner_info = it->second;
  }
  opts.logger = [](fairsem::LogLevel level, std::string_view message) {
    std::fprintf(stderr, "worker %ld %s: %.*s\n", static_cast<long>(::getpid()),
                 level == fairsem::LogLevel::error ? "error" : "warning",
                 static_cast<int>(message.size()), message.data());
  };
  return opts;
}

const char* result_name(fairsem::ReleaseResult r) {
  switch (r) {
    case fairsem::ReleaseResult::released:
      return "released";
    case fairsem::ReleaseResult::expired:
      return "expired";
    case fairsem::ReleaseResult::already_released:
      return "already_released";
  }
  return "unknown";
}

/// Reads stdin until EOF (the test closed its end, or died), calling `on_line` per line.
template <class OnLine>
void read_stdin_lines(OnLine on_line) {
  std::string pending;
  char buf[256];
  for (;;) {
    const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n == 0) return;
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    pending.append(buf, static_cast<std::size_t>(n));
    for (std::size_t end; (end = pending.find('\n')) != std::string::npos;) {
      on_line(pending.substr(0, end));
      pending.erase(0, end + 1);
    }
  }
}

int run_hold(const Args& args) {
  fairsem::SemaphoreOptions opts = semaphore_options(args);
  opts.on_lost = [](const std::string& id, const std::string& reason) {
    emit("LOST " + id + " " + reason);
  };
  fairsem::FairSemaphore sem(connection_options(args), required(args, "--name"), opts);
  fairsem::Permit permit = sem.acquire();
  emit("GRANTED " + permit.id() + " " + std::to_string(permit.fencing_token()) + " " +
       std::to_string(permit.slot()));
  const auto fence = args.flags.find("--fence");
  std::optional<fairsem::detail::Connection> store;
  if (fence != args.flags.end()) store.emplace(connection_options(args));
  read_stdin_lines([&](const std::string& line) {
    if (line != "write" || !store) {
      emit("ERROR unexpected input '" + line + "'");
      return;
    }
    const bool written = fairsem::test::fenced_write(*store, fence->second, permit.slot(),
                                                     permit.fencing_token(), opts.owner_info);
    emit(written ? "WRITE accepted" : "WRITE refused");
  });
  const fairsem::ReleaseResult result = permit.release();
  emit(std::string("RELEASED ") + result_name(result));
  return 0;
}

int run_cycle(const Args& args) {
  const fairsem::ConnectionOptions conn_opts = connection_options(args);
  const fairsem::SemaphoreOptions opts = semaphore_options(args);
  const long long threads = to_number("--threads", required(args, "--threads"));
  const long long grants = to_number("--grants", required(args, "--grants"));
  const std::string observer = required(args, "--observer");
  const std::string violations_key = required(args, "--violations");
  if (threads < 1 || grants < 1) usage("--threads and --grants must be positive");

  fairsem::FairSemaphore sem(conn_opts, required(args, "--name"), opts);
  std::atomic<long long> total_grants{0};
  std::atomic<long long> max_seen{0};
  std::atomic<long long> violations{0};
  std::atomic<long long> expired{0};
  std::mutex error_mu;
  std::string first_error;

  auto body = [&](long long index) {
    try {
      fairsem::detail::Connection conn(conn_opts);
      std::mt19937 rng(static_cast<unsigned>(::getpid()) * 1000u + static_cast<unsigned>(index));
      std::uniform_int_distribution<int> hold_us(0, 300);
      long long local_max = 0;
      for (long long i = 0; i < grants; ++i) {
        fairsem::Permit permit = sem.acquire();
        const long long inside = conn.command({"INCR", observer}).integer;
        local_max = std::max(local_max, inside);
        if (inside > opts.limit) {
          conn.command({"INCR", violations_key});
          violations.fetch_add(1);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(hold_us(rng)));
        conn.command({"DECR", observer});
        if (permit.release() != fairsem::ReleaseResult::released) expired.fetch_add(1);
        total_grants.fetch_add(1);
      }
      long long seen = max_seen.load();
      while (local_max > seen && !max_seen.compare_exchange_weak(seen, local_max)) {
      }
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (first_error.empty()) first_error = e.what();
    }
  };
  std::vector<std::thread> pool;
  for (long long t = 0; t < threads; ++t) pool.emplace_back(body, t);
  for (std::thread& t : pool) t.join();
  if (!first_error.empty()) {
    emit("ERROR " + first_error);
    std::fprintf(stderr, "fairsem_test_worker: %s\n", first_error.c_str());
    return 3;
  }
  emit("DONE grants=" + std::to_string(total_grants.load()) + " max=" +
       std::to_string(max_seen.load()) + " violations=" + std::to_string(violations.load()) +
       " expired=" + std::to_string(expired.load()));
  return 0;
}

// The thread the callback of exit-in-callback ran on (0 until then).
std::atomic<pid_t> callback_thread{0};

// Until the callback's thread, which joins the Client's other threads as it tears it down, has
// ended (its /proc/self/task entry is gone).
void wait_for_the_callbacks_thread() {
  const pid_t tid = callback_thread.load();
  if (tid == 0) return;
  const std::string task = "/proc/self/task/" + std::to_string(tid);
  while (::access(task.c_str(), F_OK) == 0) std::this_thread::yield();
}

int run_exit_in_callback(const Args& args, bool after_last_reference) {
  auto sem = std::make_shared<fairsem::FairSemaphore>(
      connection_options(args), required(args, "--name"), semaphore_options(args));
  // Shared with the callback: main may return (and its frame go) while set_value() is under way.
  auto called = std::make_shared<std::promise<void>>();
  std::future<void> done = called->get_future();
  // The callback waits until main has let go of its copy: a grant quick enough to end the
  // callback before main's reset() would leave main the last reference, tearing the Client down
  // on main's own thread (where nothing parks: exit-after-callback would wait forever).
  auto dropped = std::make_shared<std::promise<void>>();
  std::shared_future<void> main_dropped = dropped->get_future().share();
  sem->acquire_async(
      [sem, called, main_dropped](std::exception_ptr error, std::optional<fairsem::Permit> p) {
        main_dropped.wait();
        callback_thread = static_cast<pid_t>(::syscall(SYS_gettid));
        if (error || !p) {
          emit("ERROR the acquire failed");
        } else {
          emit(std::string("CALLED ") + result_name(p->release()));
        }
        called->set_value();
      });
  sem.reset();  // the callback's copy is the last
  dropped->set_value();
  done.wait();
  if (after_last_reference) {
    while (fairsem::detail::parked_threads() == 0) std::this_thread::yield();
  }
  emit("EXITING");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  const auto wall = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  emit("CLOCK " + std::to_string(wall.count()) + " " + std::to_string(::getpid()));
  try {
    if (args.mode == "hold" || args.mode == "wait") return run_hold(args);
    if (args.mode == "cycle") return run_cycle(args);
    if (args.mode == "exit-in-callback") return run_exit_in_callback(args, false);
    if (args.mode == "exit-after-callback") return run_exit_in_callback(args, true);
    if (args.mode == "exit-while-parking") {
      // Registered before fairsem's (with its first thread), so it runs after it.
      if (std::atexit(wait_for_the_callbacks_thread) != 0) usage("no exit handler");
      return run_exit_in_callback(args, false);
    }
    usage("unknown mode '" + args.mode + "'");
  } catch (const std::exception& e) {
    emit(std::string("ERROR ") + e.what());
    std::fprintf(stderr, "fairsem_test_worker: %s\n", e.what());
    return 3;
  }
}
