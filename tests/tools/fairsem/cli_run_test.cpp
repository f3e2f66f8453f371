// The installed `fairsem run`, driven as a user drives it: the permit (and slots) handed to the
// command, its exit status, queue order, signal forwarding, leaving the queue on a signal,
// --on-lost after an eviction, --max-waiters and --idle-expiry. (status, resize and --watch:
// cli_status_test.cpp; bad arguments, passwords, ACLs and the demo: cli_errors_test.cpp.)

#include <gtest/gtest.h>
#include <sys/syscall.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "acl_rule.hpp"
#include "child_process.hpp"
#include "cli_fixture.hpp"
#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using test::ChildProcess;
using test::CliTest;
using test::exit_code;
using test::holder_id;
using test::Outcome;
using test::RedisEnvironment;
using test::wait_until;

/// True once `pid` runs the fairsem binary and its main thread has `sig` blocked: either the
/// mask shows it (SigBlk in /proc/PID/status) or the thread waits in sigwaitinfo (the kernel
/// unblocks the awaited signals for the duration of that call). Checking the program first
/// matters: a sanitizer's fork() blocks every signal in the child until just before execve.
/// A thread count would not do either: sanitizer runtimes start threads of their own.
bool fairsem_blocks_signal(pid_t pid, int sig) {
  const std::string proc = "/proc/" + std::to_string(pid);
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink(proc + "/exe", ec);
  if (ec || !std::filesystem::equivalent(exe, FAIRSEM_CLI, ec) || ec) return false;
  long syscall_number = -1;
  if (std::ifstream in(proc + "/syscall"); in >> syscall_number) {
    if (syscall_number == SYS_rt_sigtimedwait) return true;
  }
  std::ifstream in(proc + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("SigBlk:", 0) == 0) {
      const unsigned long long mask = std::stoull(line.substr(7), nullptr, 16);
      return ((mask >> (sig - 1)) & 1ULL) != 0;
    }
  }
  return false;
}

TEST_F(CliTest, PrintsVersionAndHelpWithTheExitCodes) {
  const Outcome version = run({"--version"});
  EXPECT_EQ(0, version.code) << version;
  EXPECT_EQ(std::string("fairsem ") + fairsem::version() + "\n", version.out);
  const Outcome help = run({"--help"});
  EXPECT_EQ(0, help.code) << help;
  for (const char* text : {"run", "status", "evict", "resize", "demo", "64", "69", "70", "75",
                           "FAIRSEM_URL", "FAIRSEM_SLOT"}) {
    EXPECT_NE(std::string::npos, help.out.find(text)) << text << "\n" << help;
  }
}

TEST_F(CliTest, RunGivesTheCommandItsPermitAndExitsWithItsStatus) {
  const Outcome o =
      run(cmd({"run"}, {"--limit", "2", "--", "sh", "-c",
                        "echo \"$FAIRSEM_PERMIT_ID $FAIRSEM_FENCING_TOKEN\"; exit 3"}));
  EXPECT_EQ(3, o.code) << o;
  EXPECT_EQ(0u, o.out.rfind("run-", 0)) << o;
  const Status s = status();
  // The first ticket, the only one drawn.
  EXPECT_NE(std::string::npos, o.out.find(" " + std::to_string(s.last_ticket) + "\n")) << o;
  EXPECT_EQ(2, s.limit);
  EXPECT_TRUE(s.holders.empty());  // released when the command ended
}

/// The FAIRSEM_* variables `env` printed (a name listed twice is kept twice).
std::multimap<std::string, std::string> permit_variables(const std::string& env_output) {
  std::multimap<std::string, std::string> vars;
  std::istringstream in(env_output);
  for (std::string line; std::getline(in, line);) {
    const std::size_t eq = line.find('=');
    const std::string key = line.substr(0, eq);
    if (key == "FAIRSEM_PERMIT_ID" || key == "FAIRSEM_FENCING_TOKEN" || key == "FAIRSEM_SLOT" ||
        key == "FAIRSEM_SLOTS" || key == "FAIRSEM_PERMITS") {
      vars.emplace(key, line.substr(eq + 1));
    }
  }
  return vars;
}

// `env` without a shell: a shell would fold duplicate entries into one variable, hiding a stale
// inherited value left beside the new one (getenv() finds the first).
TEST_F(CliTest, RunReplacesInheritedPermitVariables) {
  const Outcome o =
      run(cmd({"run"}, {"--limit", "2", "--", "env"}), {{"FAIRSEM_PERMIT_ID", "stale"},
                                                        {"FAIRSEM_FENCING_TOKEN", "99"},
                                                        {"FAIRSEM_SLOT", "7"},
                                                        {"FAIRSEM_SLOTS", "7,8"},
                                                        {"FAIRSEM_PERMITS", "2"}});
  ASSERT_EQ(0, o.code) << o;
  const auto vars = permit_variables(o.out);
  ASSERT_EQ(5u, vars.size()) << o;
  EXPECT_EQ(0u, vars.find("FAIRSEM_PERMIT_ID")->second.rfind("run-", 0)) << o;
  // The first ticket, the only one drawn (a new counter starts at the server's clock x 1024).
  EXPECT_EQ(std::to_string(status().last_ticket), vars.find("FAIRSEM_FENCING_TOKEN")->second) << o;
  EXPECT_EQ("0", vars.find("FAIRSEM_SLOT")->second) << o;
  EXPECT_EQ("0", vars.find("FAIRSEM_SLOTS")->second) << o;
  EXPECT_EQ("1", vars.find("FAIRSEM_PERMITS")->second) << o;
}

// Numbers are decimal and digits only: CLI11 on its own reads "010" as octal (8) and "true" as 1.
TEST_F(CliTest, RunReadsItsNumbersAsDecimal) {
  const Outcome o = run(cmd(
      {"run"}, {"--limit", "010", "--permits", "010", "--", "sh", "-c", "echo $FAIRSEM_PERMITS"}));
  EXPECT_EQ(0, o.code) << o;
  EXPECT_EQ("10\n", o.out) << o;
}

// --permits N holds N units at once: the command gets every slot, and status shows the units.
TEST_F(CliTest, RunWithPermitsHoldsThatManyUnitsAndExportsEverySlot) {
  auto p = start(cmd({"run"}, {"--limit", "5", "--permits", "3", "--", "sh", "-c",
                               "echo \"ready $FAIRSEM_PERMITS $FAIRSEM_SLOTS $FAIRSEM_SLOT\"; "
                               "read line; true"}));
  const auto line = p->expect("ready");
  ASSERT_TRUE(line) << p->transcript();
  EXPECT_EQ("ready 3 0,1,2 0", *line) << p->transcript();
  const Status s = status();
  ASSERT_EQ(1u, s.holders.size());
  EXPECT_EQ(3, s.holders[0].count);
  const Outcome table = run(cmd({"status"}));
  EXPECT_NE(std::string::npos, table.out.find("limit 5, 1 holding 3 units, 0 waiting")) << table;
  EXPECT_NE(std::string::npos, table.out.find("  0,1,2  run-")) << table;
  const Outcome json = run(cmd({"status"}, {"--json"}));
  const auto holder = nlohmann::json::parse(json.out).at("holders").at(0);
  EXPECT_EQ(3, holder.at("units")) << json;
  EXPECT_EQ((std::vector<long long>{0, 1, 2}), holder.at("slots").get<std::vector<long long>>())
      << json;
  // More units than the limit: a usage error, nothing queued.
  const Outcome too_many = run(cmd({"run"}, {"--limit", "5", "--permits", "6", "--", "true"}));
  EXPECT_EQ(64, too_many.code) << too_many;
  EXPECT_NE(std::string::npos, too_many.err.find("6 units")) << too_many;
  p->close_stdin();
  EXPECT_EQ(0, exit_code(p->wait_exit())) << p->transcript();
  const Status after = status();
  EXPECT_TRUE(after.holders.empty());
  EXPECT_EQ(s.holders.at(0).ticket, after.last_ticket);  // the refused run took no ticket
}

TEST_F(CliTest, ConcurrentRunsGetDifferentSlotsAsStatusShows) {
  std::vector<std::unique_ptr<ChildProcess>> runs;
  std::map<std::string, std::string> slot_of;  // permit id -> $FAIRSEM_SLOT
  for (int i = 0; i < 2; ++i) {
    runs.push_back(
        start(cmd({"run"}, {"--limit", "2", "--", "sh", "-c",
                            "echo \"ready $FAIRSEM_PERMIT_ID $FAIRSEM_SLOT\"; read line; true"})));
    const auto line = runs.back()->expect("ready");
    ASSERT_TRUE(line) << runs.back()->transcript();
    std::istringstream words(*line);
    std::string ready, id, slot;
    words >> ready >> id >> slot;
    slot_of[id] = slot;
  }
  // Granted one after the other, each the lowest free slot.
  std::vector<std::string> slots;
  for (const auto& [id, slot] : slot_of) slots.push_back(slot);
  std::sort(slots.begin(), slots.end());
  EXPECT_EQ((std::vector<std::string>{"0", "1"}), slots);
  const Status s = status();
  ASSERT_EQ(2u, s.holders.size());
  for (const PermitInfo& h : s.holders) {
    ASSERT_EQ(1u, slot_of.count(h.id)) << h.id;
    EXPECT_EQ(slot_of[h.id], std::to_string(h.slot)) << h.id;
  }
  for (auto& p : runs) {
    p->close_stdin();
    EXPECT_EQ(0, exit_code(p->wait_exit())) << p->transcript();
  }
}

TEST_F(CliTest, ArgvGoesToTheCommandAsGivenWithoutAShell) {
  const Outcome o =
      run(cmd({"run"}, {"--limit", "1", "--", "printf", "[%s]\n", "a b", "$HOME", "*", "--limit"}));
  EXPECT_EQ(0, o.code) << o;
  EXPECT_EQ("[a b]\n[$HOME]\n[*]\n[--limit]\n", o.out);
}

TEST_F(CliTest, CommandKilledBySignalGives128PlusTheSignal) {
  const Outcome o = run(cmd({"run"}, {"--limit", "1", "--", "sh", "-c", "kill -KILL $$"}));
  EXPECT_EQ(128 + SIGKILL, o.code) << o;
  EXPECT_TRUE(status().holders.empty());
}

TEST_F(CliTest, CommandThatCannotStartGives127Or126AndReleases) {
  const Outcome missing = run(cmd({"run"}, {"--limit", "1", "--", "/nonexistent/command"}));
  EXPECT_EQ(127, missing.code) << missing;
  EXPECT_NE(std::string::npos, missing.err.find("cannot run '/nonexistent/command'")) << missing;
  char path[] = "/tmp/fairsem-cli-not-executable-XXXXXX";
  const int fd = mkstemp(path);  // mode 0600: no execute bit
  ASSERT_GE(fd, 0);
  close(fd);
  const Outcome not_executable = run(cmd({"run"}, {"--limit", "1", "--", path}));
  std::remove(path);
  EXPECT_EQ(126, not_executable.code) << not_executable;
  EXPECT_TRUE(status().holders.empty());
}

TEST_F(CliTest, HoldsThePermitWhileTheCommandRunsAndWaitZeroNeverQueues) {
  auto first = holder();
  Status s = status();
  ASSERT_EQ(1u, s.holders.size());
  EXPECT_NE(std::string::npos, s.holders[0].owner.find("sh -c")) << s.holders[0].owner;
  EXPECT_GT(s.holders[0].lease_left, 0ms);

  const Outcome busy = run(cmd({"run"}, {"--limit", "1", "--wait", "0", "--", "true"}));
  EXPECT_EQ(75, busy.code) << busy;
  EXPECT_NE(std::string::npos, busy.err.find("not queueing (--wait 0)")) << busy;
  EXPECT_TRUE(status().waiters.empty());

  const Outcome timed_out = run(cmd({"run"}, {"--limit", "1", "--wait", "300ms", "--", "true"}));
  EXPECT_EQ(75, timed_out.code) << timed_out;
  EXPECT_NE(std::string::npos, timed_out.err.find("within 300ms")) << timed_out;
  EXPECT_TRUE(status().waiters.empty());  // it left the queue

  first->close_stdin();
  EXPECT_EQ(0, exit_code(first->wait_exit())) << first->transcript();
  EXPECT_TRUE(status().holders.empty());
}

TEST_F(CliTest, QueuedRunsGetThePermitInTheOrderTheyAsked) {
  char path[] = "/tmp/fairsem-cli-order-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  auto first = holder();
  std::vector<std::unique_ptr<ChildProcess>> queued;
  for (const char* who : {"B", "C", "D"}) {
    queued.push_back(start(cmd(
        {"run"}, {"--limit", "1", "--", "sh", "-c", std::string("echo ") + who + " >> " + path})));
    const std::size_t waiting = queued.size();
    ASSERT_TRUE(wait_until([&] { return status().waiters.size() == waiting; }));
  }
  first->close_stdin();
  for (auto& p : queued) {
    p->close_stdin();
    EXPECT_EQ(0, exit_code(p->wait_exit())) << p->transcript();
  }
  std::ifstream in(path);
  const std::string order((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(path);
  EXPECT_EQ("B\nC\nD\n", order);
}

class CliSignalTest : public CliTest, public ::testing::WithParamInterface<int> {};

TEST_P(CliSignalTest, SignalToFairsemIsForwardedToTheCommand) {
  const int sig = GetParam();
  const std::string name = strsignal(sig);
  auto p = start(cmd({"run"}, {"--limit", "1", "--", "sh", "-c",
                               "trap 'echo got-signal; exit 7' INT TERM HUP; echo ready; "
                               "i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done"}));
  ASSERT_TRUE(p->expect("ready")) << p->transcript();
  p->signal(sig);
  EXPECT_TRUE(p->expect("got-signal")) << p->transcript();
  EXPECT_EQ(7, exit_code(p->wait_exit())) << name << "\n" << p->transcript();
  EXPECT_TRUE(status().holders.empty());
}

INSTANTIATE_TEST_SUITE_P(Signals, CliSignalTest, ::testing::Values(SIGINT, SIGTERM, SIGHUP),
                         [](const ::testing::TestParamInfo<int>& param) {
                           return std::string(sigabbrev_np(param.param));
                         });

TEST_F(CliTest, SignalWhileWaitingLeavesTheQueueAndExits128PlusTheSignal) {
  auto first = holder({"--lease", "60s"});
  auto waiter = start(cmd({"run"}, {"--limit", "1", "--lease", "60s", "--", "true"}));
  ASSERT_TRUE(wait_until([&] { return status().waiters.size() == 1; }));
  waiter->signal(SIGTERM);
  EXPECT_EQ(128 + SIGTERM, exit_code(waiter->wait_exit())) << waiter->transcript();
  // Gone at once, not after its 60 s lease.
  EXPECT_TRUE(status().waiters.empty());
  EXPECT_EQ(1u, status().holders.size());
  first->close_stdin();
  EXPECT_EQ(0, exit_code(first->wait_exit()));
}

// A signal soon after start (signals already blocked, the first call racing with the signal)
// leaves no waiter behind. The test does not force the race with the first call; it checks
// the outcome over several rounds.
TEST_F(CliTest, SignalSoonAfterStartLeavesNoWaiterBehind) {
  auto first = holder({"--lease", "60s"});
  for (int round = 0; round < 5; ++round) {
    auto waiter = start(cmd({"run"}, {"--limit", "1", "--lease", "60s", "--", "true"}));
    // Signals are blocked: from here on the signal waits for sigwaitinfo, racing with the
    // acquiring thread's first call.
    ASSERT_TRUE(wait_until([&] { return fairsem_blocks_signal(waiter->pid(), SIGTERM); }, 30s));
    waiter->signal(SIGTERM);
    EXPECT_EQ(128 + SIGTERM, exit_code(waiter->wait_exit())) << waiter->transcript();
    EXPECT_TRUE(status().waiters.empty()) << "round " << round;
  }
  first->close_stdin();
  EXPECT_EQ(0, exit_code(first->wait_exit()));
}

TEST_F(CliTest, EvictedHolderWithOnLostKillIsTerminatedAndExits75) {
  auto p = start(cmd({"run"}, {"--limit", "1", "--lease", "1s", "--", "sh", "-c",
                               "trap 'echo got-TERM; exit 0' TERM; echo ready; "
                               "i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done"}));
  ASSERT_TRUE(p->expect("ready")) << p->transcript();
  const std::string id = holder_id(run(cmd({"status"}, {"--json"})));
  const Outcome evicted = run(cmd({"evict"}, {"--id", id}));
  EXPECT_EQ(0, evicted.code) << evicted;
  EXPECT_NE(std::string::npos, evicted.out.find("evicted holder " + id)) << evicted;
  EXPECT_TRUE(p->expect("got-TERM")) << p->transcript();
  EXPECT_EQ(75, exit_code(p->wait_exit())) << p->transcript();  // although the command exited 0
  EXPECT_NE(std::string::npos, p->stderr_text().find("evicted")) << p->transcript();

  const Outcome again = run(cmd({"evict"}, {"--id", id}));  // e.g. a retry: harmless
  EXPECT_EQ(0, again.code) << again;
  EXPECT_NE(std::string::npos, again.out.find("was evicted already")) << again;
  const Outcome unknown = run(cmd({"evict"}, {"--id", "never-there"}));
  EXPECT_EQ(1, unknown.code) << unknown;
  EXPECT_NE(std::string::npos, unknown.err.find("has no permit never-there")) << unknown;
}

TEST_F(CliTest, EvictedHolderWithOnLostWarnKeepsRunning) {
  auto p = holder({"--lease", "1s", "--on-lost", "warn"});
  const std::string id = holder_id(run(cmd({"status"}, {"--json"})));
  ASSERT_EQ(0, run(cmd({"evict"}, {"--id", id})).code);
  ASSERT_TRUE(wait_until([&] {
    return p->stderr_text().find("keeps running (--on-lost warn)") != std::string::npos;
  })) << p->transcript();
  p->close_stdin();
  EXPECT_TRUE(p->expect("done")) << p->transcript();  // the command ran to its end
  EXPECT_EQ(0, exit_code(p->wait_exit())) << p->transcript();
}

TEST_F(CliTest, RunBehindMaxWaitersExits75AtOnceWithoutQueueing) {
  auto first = holder();
  auto waiter = start(cmd({"run"}, {"--limit", "1", "--", "true"}));
  ASSERT_TRUE(wait_until([&] { return status().waiters.size() == 1; }));
  const Outcome full = run(cmd({"run"}, {"--limit", "1", "--max-waiters", "1", "--", "true"}));
  EXPECT_EQ(75, full.code) << full;
  EXPECT_NE(std::string::npos, full.err.find("the queue is full: 1 requests wait")) << full;
  EXPECT_EQ(1u, status().waiters.size());
  // Room behind the one waiter: a bound of 2 queues, and is served in turn.
  auto second = start(cmd({"run"}, {"--limit", "1", "--max-waiters", "2", "--", "true"}));
  ASSERT_TRUE(wait_until([&] { return status().waiters.size() == 2; }));
  first->close_stdin();
  EXPECT_EQ(0, exit_code(first->wait_exit()));
  EXPECT_EQ(0, exit_code(waiter->wait_exit())) << waiter->transcript();
  EXPECT_EQ(0, exit_code(second->wait_exit())) << second->transcript();
}

TEST_F(CliTest, RunWithIdleExpiryLeavesKeysThatExpireAndRefusesAnotherExpiry) {
  const std::string meta = prefix_ + ":{cli}:meta";
  const Outcome used =
      run(cmd({"run"}, {"--limit", "1", "--lease", "1s", "--idle-expiry", "1s", "--", "true"}));
  ASSERT_EQ(0, used.code) << used;
  EXPECT_EQ("1000", admin_.command({"HGET", meta, "expiry"}).str);
  const Outcome other = run(cmd({"run"}, {"--limit", "1", "--idle-expiry", "1h", "--", "true"}));
  EXPECT_EQ(64, other.code) << other;
  EXPECT_NE(std::string::npos, other.err.find("but Redis stores idle_expiry 1000 ms")) << other;
  EXPECT_TRUE(wait_until([&] {
    return admin_.command({"EXISTS", meta}).integer == 0;
  })) << "the semaphore's keys did not expire";
}

TEST_F(CliTest, EvictedWaiterExits75) {
  auto first = holder();
  auto waiter = start(cmd({"run"}, {"--limit", "1", "--", "true"}));
  ASSERT_TRUE(wait_until([&] { return status().waiters.size() == 1; }));
  const std::string id = status().waiters.at(0).id;
  const Outcome evicted = run(cmd({"evict"}, {"--id", id}));
  EXPECT_EQ(0, evicted.code) << evicted;
  EXPECT_NE(std::string::npos, evicted.out.find("evicted waiter " + id)) << evicted;
  EXPECT_EQ(75, exit_code(waiter->wait_exit())) << waiter->transcript();
  EXPECT_NE(std::string::npos, waiter->stderr_text().find("was evicted")) << waiter->transcript();
  first->close_stdin();
  EXPECT_EQ(0, exit_code(first->wait_exit()));
}

}  // namespace
}  // namespace fairsem
