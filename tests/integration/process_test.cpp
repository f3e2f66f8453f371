// Multi-process tests: separate worker processes (tests/support/worker.cpp) share one semaphore
// with each other and with this process, so a test can SIGKILL a holder or a waiter, SIGSTOP a
// holder past its lease, or run a client whose wall clock is an hour off (libfaketime).

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "child_process.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "fairsem/semaphore.hpp"
#include "fenced_store.hpp"
#include "test_env.hpp"
#include "wait.hpp"

#ifndef FAIRSEM_TEST_WORKER
#error "FAIRSEM_TEST_WORKER (the path of fairsem_test_worker) must be defined by the build"
#endif

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using fairsem::FairSemaphore;
using fairsem::Permit;
using fairsem::ReleaseResult;
using fairsem::SemaphoreOptions;
using fairsem::Status;
using fairsem::detail::Connection;
using fairsem::test::describe_wait_status;
using fairsem::test::redis_options;
using fairsem::test::wait_until;
using std::chrono::milliseconds;

// Hang detectors, not speed requirements: sanitizer builds on a loaded machine are slow.
constexpr auto kTimeout = 30s;

long long ms(Clock::duration d) { return std::chrono::duration_cast<milliseconds>(d).count(); }

/// A measurement worth seeing in the log (not asserted).
void note(const std::string& text) { std::printf("[   NOTE   ] %s\n", text.c_str()); }

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

/// One fairsem_test_worker process (see ChildProcess).
class Worker : public fairsem::test::ChildProcess {
 public:
  explicit Worker(const std::vector<std::string>& args,
                  const std::map<std::string, std::string>& env_overrides = {})
      : ChildProcess(with_worker_path(args), env_overrides) {}

 private:
  static std::vector<std::string> with_worker_path(const std::vector<std::string>& args) {
    std::vector<std::string> argv{FAIRSEM_TEST_WORKER};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
};

::testing::AssertionResult exited_cleanly(const std::optional<int>& status, const Worker& w) {
  if (!status) {
    return ::testing::AssertionFailure() << "worker did not exit in time\n" << w.transcript();
  }
  if (WIFEXITED(*status) && WEXITSTATUS(*status) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "worker " << describe_wait_status(*status) << "\n"
                                       << w.transcript();
}

/// A "GRANTED <id> <token> <slot>" line.
struct Grant {
  std::string id;
  long long token = 0;
  long long slot = -1;
};

std::optional<Grant> parse_grant(const std::optional<std::string>& line) {
  if (!line) return std::nullopt;
  const auto words = split(*line);
  if (words.size() != 4 || words[0] != "GRANTED") return std::nullopt;
  return Grant{words[1], std::stoll(words[2]), std::stoll(words[3])};
}

/// try_acquire_for on a thread of this process, so the test can act while it waits.
class BackgroundAcquire {
 public:
  BackgroundAcquire(FairSemaphore& sem, Clock::duration timeout)
      : thread_([this, &sem, timeout] {
          std::optional<Permit> permit;
          std::string error;
          try {
            permit = sem.try_acquire_for(timeout);
          } catch (const std::exception& e) {
            error = e.what();
          }
          const auto at = Clock::now();
          std::lock_guard<std::mutex> lock(mu_);
          permit_ = std::move(permit);
          error_ = std::move(error);
          finished_at_ = at;
          done_ = true;
        }) {}
  ~BackgroundAcquire() { join(); }
  BackgroundAcquire(const BackgroundAcquire&) = delete;
  BackgroundAcquire& operator=(const BackgroundAcquire&) = delete;

  bool done() const {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  void join() {
    if (thread_.joinable()) thread_.join();
  }
  // After join():
  std::optional<Permit>& permit() { return permit_; }
  const std::string& error() const { return error_; }
  Clock::time_point finished_at() const { return finished_at_; }

 private:
  mutable std::mutex mu_;
  bool done_ = false;
  std::optional<Permit> permit_;
  std::string error_;
  Clock::time_point finished_at_;
  std::thread thread_;  // last: starts once the fields above exist
};

bool has_owner(const std::vector<fairsem::PermitInfo>& list, const std::string& owner) {
  return std::any_of(list.begin(), list.end(),
                     [&](const fairsem::PermitInfo& p) { return p.owner == owner; });
}

bool has_id(const Status& s, const std::string& id) {
  auto match = [&](const fairsem::PermitInfo& p) { return p.id == id; };
  return std::any_of(s.holders.begin(), s.holders.end(), match) ||
         std::any_of(s.waiters.begin(), s.waiters.end(), match);
}

std::string describe(const Status& s) {
  std::ostringstream out;
  out << "limit " << s.limit << ", last ticket " << s.last_ticket << "\n";
  for (const auto& p : s.holders) {
    out << "  holder " << p.id << " ticket " << p.ticket << " lease_left " << p.lease_left.count()
        << " ms owner '" << p.owner << "'\n";
  }
  for (const auto& p : s.waiters) {
    out << "  waiter " << p.id << " ticket " << p.ticket << " lease_left " << p.lease_left.count()
        << " ms owner '" << p.owner << "'\n";
  }
  return out.str();
}

class ProcessTest : public ::testing::Test {
 protected:
  const std::string prefix_ = fairsem::test::unique_prefix();
  const std::string name_ = "procsem";

  /// A key of the semaphore: "<prefix>:{<name>}:<suffix>".
  std::string key(const std::string& suffix) const {
    return prefix_ + ":{" + name_ + "}:" + suffix;
  }

  FairSemaphore open(long long limit, milliseconds lease, const std::string& owner) const {
    SemaphoreOptions opts;
    opts.key_prefix = prefix_;
    opts.limit = limit;
    opts.lease = lease;
    opts.owner_info = owner;
    return FairSemaphore(fairsem::test::redis_options(), name_, opts);
  }

  std::vector<std::string> worker_args(long long limit, milliseconds lease,
                                       const std::string& owner,
                                       const std::vector<std::string>& mode) const {
    std::vector<std::string> args{"--url",      fairsem::test::RedisEnvironment::instance().url(),
                                  "--prefix",   prefix_,
                                  "--name",     name_,
                                  "--limit",    std::to_string(limit),
                                  "--lease-ms", std::to_string(lease.count()),
                                  "--owner",    owner};
    args.insert(args.end(), mode.begin(), mode.end());
    return args;
  }

  fairsem::detail::Connection raw() const {
    return fairsem::detail::Connection(fairsem::test::redis_options());
  }
};

// --- 1. Safety --------------------------------------------------------------------------------

TEST_F(ProcessTest, ManyProcessesAndThreadsNeverExceedTheLimit) {
  constexpr long long kLimit = 3;
  constexpr int kProcesses = 3;
  constexpr int kThreads = 4;
  constexpr int kGrantsPerThread = 834;  // 3 x 4 x 834 = 10,008 grants
  const milliseconds lease = 5s;         // long enough that no permit expires under load
  const std::string observer = prefix_ + ":observer";
  const std::string violations_key = prefix_ + ":violations";

  // Opened first so the limit is stored before the workers race to open it; the counter is set
  // so that tickets count the grants (a new one starts at the server's clock times 1024).
  FairSemaphore sem = open(kLimit, lease, "test-observer");
  constexpr long long kFirstTicket = 1000;
  raw().command({"SET", key("counter"), std::to_string(kFirstTicket - 1)});

  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < kProcesses; ++i) {
    workers.push_back(std::make_unique<Worker>(
        worker_args(kLimit, lease, "cycler-" + std::to_string(i),
                    {"cycle", "--threads", std::to_string(kThreads), "--grants",
                     std::to_string(kGrantsPerThread), "--observer", observer, "--violations",
                     violations_key})));
  }

  long long grants = 0;
  long long max_inside = 0;
  long long violations = 0;
  long long expired = 0;
  for (auto& w : workers) {
    // A hang detector only: 10,000 grants take seconds, even under TSan.
    const auto done = w->expect("DONE ", 300s);
    ASSERT_TRUE(done) << w->transcript();
    std::map<std::string, long long> fields;
    for (const std::string& word : split(*done)) {
      const auto eq = word.find('=');
      if (eq != std::string::npos) fields[word.substr(0, eq)] = std::stoll(word.substr(eq + 1));
    }
    ASSERT_EQ(fields.size(), 4u) << *done;
    EXPECT_EQ(fields["grants"], kThreads * kGrantsPerThread) << w->transcript();
    grants += fields["grants"];
    max_inside = std::max(max_inside, fields["max"]);
    violations += fields["violations"];
    expired += fields["expired"];
    EXPECT_TRUE(exited_cleanly(w->wait_exit(), *w));
  }

  note(std::to_string(grants) + " grants, at most " + std::to_string(max_inside) +
       " holders seen inside at once");
  EXPECT_EQ(violations, 0) << "more than " << kLimit << " holders were inside at once";
  EXPECT_LE(max_inside, kLimit);
  // The observer can see concurrency at all (otherwise a violation could not be seen either).
  EXPECT_GE(max_inside, 2);
  EXPECT_GE(grants, 10000);
  EXPECT_EQ(expired, 0) << "a permit expired under a 5 s lease";

  auto conn = raw();
  EXPECT_TRUE(conn.command({"GET", violations_key}).is_nil());
  EXPECT_EQ(conn.command({"GET", observer}).str, "0");

  const Status s = sem.status();
  EXPECT_TRUE(s.holders.empty()) << describe(s);
  EXPECT_TRUE(s.waiters.empty()) << describe(s);
  // One ticket per grant: no acquire took two, none was lost.
  EXPECT_EQ(s.last_ticket, kFirstTicket - 1 + grants);
}

// --- 2. Liveness: a killed holder -------------------------------------------------------------

TEST_F(ProcessTest, PermitOfAKilledHolderPassesOnWithinItsLease) {
  const milliseconds lease = 1000ms;
  Worker holder(worker_args(1, lease, "holder-A", {"hold"}));
  const auto a = parse_grant(holder.expect("GRANTED "));
  ASSERT_TRUE(a) << holder.transcript();

  FairSemaphore sem = open(1, lease, "waiter-B");
  BackgroundAcquire b(sem, kTimeout);
  ASSERT_TRUE(wait_until([&] { return has_owner(sem.status().waiters, "waiter-B"); }))
      << describe(sem.status());
  // Safety first: while A is alive (and renewing), B must not get the permit.
  ASSERT_FALSE(b.done()) << "B returned while A held the permit: "
                         << (b.error().empty() ? "granted" : b.error());

  const auto killed_at = Clock::now();
  holder.kill_and_reap();
  b.join();
  ASSERT_TRUE(b.error().empty()) << b.error();
  ASSERT_TRUE(b.permit().has_value()) << "B never got the permit of the killed holder";
  const auto waited = b.finished_at() - killed_at;
  note("B was granted " + std::to_string(ms(waited)) + " ms after A was killed (lease " +
       std::to_string(lease.count()) + " ms)");
  // The correctness bound of the lease mechanism: one lease, one poll, and generous slack.
  EXPECT_LE(waited, lease + lease / 3 + 5s) << "granted " << ms(waited) << " ms after the kill";
  EXPECT_GT(b.permit()->fencing_token(), a->token);

  const Status s = sem.status();
  ASSERT_EQ(s.holders.size(), 1u) << describe(s);
  EXPECT_EQ(s.holders[0].id, b.permit()->id());
  EXPECT_FALSE(has_id(s, a->id)) << describe(s);
  EXPECT_EQ(b.permit()->release(), ReleaseResult::released);
}

// A process whose main returns while an asynchronous acquire's callback drops the last
// reference to its Client, on a worker thread: that thread destroys the Client's runtime and
// parks itself, racing the exit (and the exit handler that joins parked threads). Every run
// exits 0, and the sanitizers (ChildProcess checks
// their reports, ThreadSanitizer's leaked or racing threads among them) stay silent.
TEST_F(ProcessTest, MainReturningWhileACallbackDropsTheLastClientExitsCleanly) {
  for (int run = 0; run < 21; ++run) {
    // Main returns at once (the process ends the thread tearing the Client down); once that
    // thread parked (fairsem's exit handler joins it); or at once, and the process waits for
    // the thread, which parks after fairsem's exit handler ran (it is detached).
    const char* modes[] = {"exit-in-callback", "exit-after-callback", "exit-while-parking"};
    const char* mode = modes[run % 3];
    Worker worker(worker_args(1, 5000ms, "exiting-" + std::to_string(run), {mode}));
    ASSERT_TRUE(worker.expect("CALLED released").has_value()) << worker.transcript();
    ASSERT_TRUE(worker.expect("EXITING").has_value()) << worker.transcript();
    ASSERT_TRUE(exited_cleanly(worker.wait_exit(), worker)) << "run " << run;
  }
  EXPECT_TRUE(open(1, 5000ms, "check").status().holders.empty());
}

// --- 3. Liveness: a killed waiter -------------------------------------------------------------

TEST_F(ProcessTest, KilledWaiterDoesNotBlockTheQueue) {
  const milliseconds lease = 1000ms;
  FairSemaphore sem = open(1, lease, "test-holder");
  auto held = sem.try_acquire();
  ASSERT_TRUE(held);

  Worker waiter(worker_args(1, lease, "waiter-W", {"wait"}));
  std::string w_id;
  ASSERT_TRUE(wait_until([&] {
    const Status s = sem.status();
    if (s.waiters.size() != 1 || s.waiters[0].owner != "waiter-W") return false;
    w_id = s.waiters[0].id;
    return true;
  })) << describe(sem.status())
      << waiter.transcript();

  // A second waiter queues behind W (while W is still alive, so it is surely behind it).
  FairSemaphore sem2 = open(1, lease, "waiter-2");
  BackgroundAcquire second(sem2, kTimeout);
  ASSERT_TRUE(wait_until([&] {
    const Status s = sem.status();
    return s.waiters.size() == 2 && s.waiters[0].id == w_id && s.waiters[1].owner == "waiter-2";
  })) << describe(sem.status());

  waiter.kill_and_reap();
  const auto released_at = Clock::now();
  // Promotes the dead W, whose entry must then be reaped within its lease.
  EXPECT_EQ(held->release(), ReleaseResult::released);

  second.join();
  ASSERT_TRUE(second.error().empty()) << second.error();
  ASSERT_TRUE(second.permit().has_value()) << "the dead waiter blocked the queue";
  const auto waited = second.finished_at() - released_at;
  note("the waiter behind the dead one was granted " + std::to_string(ms(waited)) +
       " ms after the release (lease " + std::to_string(lease.count()) + " ms)");
  EXPECT_LE(waited, lease + lease / 3 + 5s) << "granted " << ms(waited) << " ms after release";

  // No trace of W is left: not in the queue, not in the info hash, no wake list.
  auto conn = raw();
  auto traces_of_w = [&] {
    std::string found;
    const Status s = sem.status();
    if (has_id(s, w_id)) found += " listed in status();";
    if (has_owner(s.holders, "waiter-W") || has_owner(s.waiters, "waiter-W")) {
      found += " its owner info listed in status();";
    }
    if (conn.command({"EXISTS", key("wake:" + w_id)}).integer != 0) found += " wake list exists;";
    if (conn.command({"HEXISTS", key("info"), w_id}).integer != 0) found += " in the info hash;";
    if (!conn.command({"ZSCORE", key("owner"), w_id}).is_nil()) found += " in the owner zset;";
    if (!conn.command({"ZSCORE", key("time"), w_id}).is_nil()) found += " in the time zset;";
    return found;
  };
  ASSERT_TRUE(wait_until([&] { return traces_of_w().empty(); }))
      << "dead waiter " << w_id << ":" << traces_of_w() << "\n"
      << describe(sem.status());

  const Status s = sem.status();
  ASSERT_EQ(s.holders.size(), 1u) << describe(s);
  EXPECT_EQ(s.holders[0].id, second.permit()->id());
  EXPECT_TRUE(s.waiters.empty()) << describe(s);
  EXPECT_EQ(second.permit()->release(), ReleaseResult::released);
}

// --- 4. A holder paused past its lease learns that it lost the permit ------------------------

TEST_F(ProcessTest, HolderStoppedPastItsLeaseIsToldItLostThePermit) {
  const milliseconds lease = 600ms;
  Worker holder(worker_args(1, lease, "holder-A", {"hold"}));
  const auto a = parse_grant(holder.expect("GRANTED "));
  ASSERT_TRUE(a) << holder.transcript();

  holder.signal(SIGSTOP);
  ASSERT_TRUE(holder.wait_stopped()) << holder.transcript();

  FairSemaphore sem = open(1, lease, "thief");
  auto taken = sem.try_acquire_for(kTimeout);
  ASSERT_TRUE(taken) << "the stopped holder's permit never passed on\n" << describe(sem.status());
  EXPECT_GT(taken->fencing_token(), a->token);

  holder.signal(SIGCONT);
  const auto lost = holder.expect("LOST ");
  ASSERT_TRUE(lost) << "on_lost was not called after the resume\n" << holder.transcript();
  EXPECT_EQ(split(*lost).at(1), a->id);

  holder.close_stdin();
  const auto released = holder.expect("RELEASED ");
  ASSERT_TRUE(released) << holder.transcript();
  EXPECT_EQ(*released, "RELEASED expired");
  EXPECT_TRUE(exited_cleanly(holder.wait_exit(), holder));

  // The resumed holder's release did not free the permit that passed on.
  const Status s = sem.status();
  ASSERT_EQ(s.holders.size(), 1u) << describe(s);
  EXPECT_EQ(s.holders[0].id, taken->id());
  EXPECT_FALSE(taken->lost());
  EXPECT_EQ(taken->release(), ReleaseResult::released);
}

// --- 4b. Per-slot fencing: a resumed holder's (slot, token) is refused ------------------------

TEST_F(ProcessTest, FencedStoreRefusesAStoppedHolderOnceItsSlotPassedOn) {
  const milliseconds lease = 600ms;
  const std::string store = prefix_ + ":store";
  Worker holder(worker_args(2, lease, "holder-A", {"hold", "--fence", store}));
  const auto a = parse_grant(holder.expect("GRANTED "));
  ASSERT_TRUE(a) << holder.transcript();
  ASSERT_EQ(0, a->slot);
  FairSemaphore sem = open(2, lease, "B");
  Permit other = sem.acquire();  // slot 1 throughout: only A's slot can pass on
  ASSERT_EQ(1, other.slot());
  holder.write_stdin("write\n");
  EXPECT_EQ(holder.expect("WRITE "), "WRITE accepted") << holder.transcript();

  holder.signal(SIGSTOP);
  ASSERT_TRUE(holder.wait_stopped()) << holder.transcript();
  auto taken = sem.try_acquire_for(kTimeout);
  ASSERT_TRUE(taken) << "the stopped holder's permit never passed on\n" << describe(sem.status());
  EXPECT_EQ(a->slot, taken->slot());
  EXPECT_GT(taken->fencing_token(), a->token);
  Connection conn(redis_options());
  EXPECT_TRUE(fairsem::test::fenced_write(conn, store, taken->slot(), taken->fencing_token(), "B"));
  const Status s = sem.status();
  ASSERT_EQ(s.holders.size(), 2u) << describe(s);
  EXPECT_EQ(s.holders[0].id, other.id());
  EXPECT_EQ(s.holders[0].slot, 1);
  EXPECT_EQ(s.holders[1].id, taken->id());
  EXPECT_EQ(s.holders[1].slot, 0);

  // The resumed holder still believes in its permit for a moment; the store refuses it.
  holder.signal(SIGCONT);
  holder.write_stdin("write\n");
  EXPECT_EQ(holder.expect("WRITE "), "WRITE refused") << holder.transcript();
  EXPECT_EQ("B", fairsem::test::fenced_value(conn, store, 0));
  holder.close_stdin();
  const auto released = holder.expect("RELEASED ");
  ASSERT_TRUE(released) << holder.transcript();
  EXPECT_EQ(*released, "RELEASED expired");
  EXPECT_TRUE(exited_cleanly(holder.wait_exit(), holder));
}

// --- 5. A client whose wall clock is an hour off ----------------------------------------------

class FakeClockTest : public ProcessTest,
                      public ::testing::WithParamInterface<std::pair<const char*, long long>> {};

TEST_P(FakeClockTest, ClientWithAnHourOffClockBehavesTheSame) {
  const auto [faketime, offset_seconds] = GetParam();
  const std::string lib = fairsem::test::find_libfaketime();
  ASSERT_FALSE(lib.empty()) << "libfaketime.so.1 not found: install the Debian package "
                               "'faketime' (scripts/lib.sh lists it)";
  const milliseconds lease = 2000ms;

  // The worker queues behind a holder on the real clock first, so it is tested as a waiter
  // (woken by a release) and then as a holder (renewing; deadlines from the server clock).
  FairSemaphore sem = open(1, lease, "real-clock");
  auto held = sem.try_acquire();
  ASSERT_TRUE(held);

  std::map<std::string, std::string> env{
      {"LD_PRELOAD", lib},
      {"FAKETIME", faketime},
      // Only the wall clock is off; steady_clock (which fairsem uses for every duration) is
      // left alone, since libfaketime cannot shift it consistently with timed waits.
      {"FAKETIME_DONT_FAKE_MONOTONIC", "1"},
  };
  // ASan insists on being first in the library list; libfaketime is preloaded before it.
  const char* asan = std::getenv("ASAN_OPTIONS");
  env["ASAN_OPTIONS"] = std::string(asan != nullptr && *asan != '\0' ? asan : "") +
                        (asan != nullptr && *asan != '\0' ? ":" : "") + "verify_asan_link_order=0";
  Worker worker(worker_args(1, lease, "faked-clock", {"wait"}), env);

  // The fake took effect: the worker's wall clock is off by the offset.
  const auto clock_line = worker.expect("CLOCK ");
  const auto real_now =
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  ASSERT_TRUE(clock_line) << worker.transcript();
  const auto clock_words = split(*clock_line);
  ASSERT_EQ(clock_words.size(), 3u) << *clock_line;
  const long long skew_ms = std::stoll(clock_words[1]) - real_now;
  ASSERT_NEAR(static_cast<double>(skew_ms), static_cast<double>(offset_seconds * 1000), 60000.0)
      << "FAKETIME=" << faketime << " did not shift the worker's clock (LD_PRELOAD=" << lib << ")";

  // As a waiter: its queue entry carries a server-clock deadline.
  ASSERT_TRUE(wait_until([&] { return has_owner(sem.status().waiters, "faked-clock"); }))
      << describe(sem.status()) << worker.transcript();
  {
    const Status s = sem.status();
    ASSERT_EQ(s.waiters.size(), 1u) << describe(s);
    EXPECT_GT(s.waiters[0].lease_left.count(), 0) << describe(s);
    EXPECT_LE(s.waiters[0].lease_left, lease) << describe(s);
  }
  EXPECT_EQ(held->release(), ReleaseResult::released);
  const auto w = parse_grant(worker.expect("GRANTED "));
  ASSERT_TRUE(w) << worker.transcript();
  const auto granted_at = Clock::now();

  // As a holder, across more than one lease (so it must renew): always the holder, its lease
  // within (0, lease] (a client-clock deadline would be an hour too long, or already past),
  // and a real-clock client cannot take the permit.
  int checks = 0;
  while (Clock::now() - granted_at < lease + lease / 2 || checks < 3) {
    const Status s = sem.status();
    ASSERT_EQ(s.holders.size(), 1u) << describe(s);
    ASSERT_EQ(s.holders[0].id, w->id) << describe(s);
    ASSERT_GT(s.holders[0].lease_left.count(), 0) << describe(s);
    ASSERT_LE(s.holders[0].lease_left, lease) << describe(s);
    ASSERT_FALSE(sem.try_acquire()) << "a real-clock client took the faked client's permit";
    ++checks;
    // Paces the checks over the observation window; not a synchronisation.
    std::this_thread::sleep_for(100ms);
  }

  const auto killed_at = Clock::now();
  worker.kill_and_reap();
  auto taken = sem.try_acquire_for(kTimeout);
  ASSERT_TRUE(taken) << describe(sem.status());
  const auto waited = Clock::now() - killed_at;
  note("worker clock skew " + std::to_string(skew_ms) + " ms; the real-clock client was granted " +
       std::to_string(ms(waited)) + " ms after the faked one was killed");
  EXPECT_LE(waited, lease + lease / 3 + 5s) << "granted " << ms(waited) << " ms after the kill";
  EXPECT_GT(taken->fencing_token(), w->token);
  EXPECT_EQ(taken->release(), ReleaseResult::released);
}

INSTANTIATE_TEST_SUITE_P(Offsets, FakeClockTest,
                         ::testing::Values(std::make_pair("+1h", 3600LL),
                                           std::make_pair("-1h", -3600LL)),
                         [](const auto& param_info) {
                           return std::string(param_info.param.second > 0 ? "Ahead" : "Behind");
                         });

}  // namespace
