// The installed `fairsem` command, driven as a user drives it: exit codes, the permit (and
// slot) handed to the command, signal forwarding, --on-lost after an eviction, status --json
// and --watch, resize, bad arguments, an unreachable or refusing Redis, and the demo.

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
#include "fairsem/impl/connection.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using test::ChildProcess;
using test::CliTest;
using test::exit_code;
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
  EXPECT_NE(std::string::npos, o.out.find(" 1\n")) << o;  // the first ticket
  const Status s = status();
  EXPECT_EQ(2, s.limit);
  EXPECT_TRUE(s.holders.empty());  // released when the command ended
  EXPECT_EQ(1, s.last_ticket);
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
  EXPECT_EQ("1", vars.find("FAIRSEM_FENCING_TOKEN")->second) << o;
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
  EXPECT_EQ(1, after.last_ticket);  // the refused run took no ticket
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

std::string holder_id(const Outcome& json_status) {
  const auto j = nlohmann::json::parse(json_status.out);
  return j.at("holders").at(0).at("id").get<std::string>();
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

TEST_F(CliTest, StatusJsonAndTableShowHoldersAndWaitersInOrder) {
  auto a = holder({}, "shown");
  auto b = start(cmd({"run"}, {"--limit", "1", "--", "true"}, "shown"));
  ASSERT_TRUE(wait_until([&] { return status("shown").waiters.size() == 1; }));
  auto c = start(cmd({"run"}, {"--limit", "1", "--", "true"}, "shown"));
  ASSERT_TRUE(wait_until([&] { return status("shown").waiters.size() == 2; }));

  const Outcome json = run(cmd({"status"}, {"--json"}, "shown"));
  ASSERT_EQ(0, json.code) << json;
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ("shown", j.at("name"));
  EXPECT_EQ(1, j.at("limit"));
  EXPECT_EQ(3, j.at("counter"));
  ASSERT_EQ(1u, j.at("holders").size());
  const auto& h = j.at("holders").at(0);
  EXPECT_EQ(1, h.at("token"));
  EXPECT_EQ(0, h.at("slot"));
  EXPECT_GT(h.at("lease_left_ms").get<long long>(), 0);
  EXPECT_NE(std::string::npos, h.at("owner").get<std::string>().find("sh -c")) << json;
  ASSERT_EQ(2u, j.at("waiters").size());
  EXPECT_EQ(2, j.at("waiters").at(0).at("token"));
  EXPECT_EQ(3, j.at("waiters").at(1).at("token"));
  EXPECT_TRUE(j.at("waiters").at(0).at("slot").is_null()) << json;  // waiters have no slot
  const std::vector<std::string> keys = {"id",    "token",         "units", "slot",
                                         "slots", "lease_left_ms", "owner"};
  for (const auto& entry : {h, j.at("waiters").at(0)}) {
    std::vector<std::string> seen;
    for (auto it = entry.begin(); it != entry.end(); ++it) seen.push_back(it.key());
    std::sort(seen.begin(), seen.end());
    std::vector<std::string> want = keys;
    std::sort(want.begin(), want.end());
    EXPECT_EQ(want, seen);
  }

  const Outcome table = run(cmd({"status"}, {}, "shown"));
  ASSERT_EQ(0, table.code) << table;
  EXPECT_NE(std::string::npos, table.out.find("limit 1, 1 holding 1 unit, 2 waiting")) << table;
  // The holder's row starts with its slot, under SLOT; the waiters' with their place in line.
  const std::string holder_id = h.at("id");
  EXPECT_NE(std::string::npos, table.out.find("holders:\n  SLOT  ID")) << table;
  EXPECT_NE(std::string::npos, table.out.find("\n     0  " + holder_id + " ")) << table;
  EXPECT_NE(std::string::npos, table.out.find("waiters, in queue order:\n     #  ID")) << table;
  const std::string first_waiter = j.at("waiters").at(0).at("id");
  const std::string second_waiter = j.at("waiters").at(1).at("id");
  EXPECT_LT(table.out.find(first_waiter), table.out.find(second_waiter)) << table;

  a->close_stdin();
  for (auto* p : {a.get(), b.get(), c.get()}) {
    p->close_stdin();
    EXPECT_EQ(0, exit_code(p->wait_exit())) << p->transcript();
  }
  const Outcome unused = run(cmd({"status"}, {"--json"}, "never-used"));
  EXPECT_EQ(0, unused.code) << unused;
  EXPECT_EQ(0, nlohmann::json::parse(unused.out).at("limit"));
}

TEST_F(CliTest, ResizeGrowsGrantingAWaitingRunAndShrinksWithoutTakingPermits) {
  auto first = holder();
  auto waiter =
      start(cmd({"run"}, {"--limit", "1", "--", "sh", "-c", "echo \"granted $FAIRSEM_SLOT\""}));
  ASSERT_TRUE(wait_until([&] { return status().waiters.size() == 1; }));

  const Outcome grown = run(cmd({"resize"}, {"2"}));  // --name NAME NEW_LIMIT
  EXPECT_EQ(0, grown.code) << grown;
  EXPECT_EQ("resized cli: limit 1 -> 2 (1 waiter granted)\n", grown.out) << grown;
  EXPECT_TRUE(waiter->expect("granted 1")) << waiter->transcript();  // the free slot
  EXPECT_EQ(0, exit_code(waiter->wait_exit())) << waiter->transcript();
  EXPECT_EQ(2, status().limit);

  // Positional NAME; the holder keeps its permit, and a bad NEW_LIMIT changes nothing.
  const Outcome shrunk = run({"resize", "cli", "1", "--prefix", prefix_});
  EXPECT_EQ(0, shrunk.code) << shrunk;
  EXPECT_EQ(
      "resized cli: limit 2 -> 1 (holders keep their permits; none is granted until fewer than 1 "
      "hold)\n",
      shrunk.out)
      << shrunk;
  const Outcome refused = run(cmd({"resize"}, {"0"}));
  EXPECT_EQ(64, refused.code) << refused;
  const Status s = status();
  EXPECT_EQ(1, s.limit);
  ASSERT_EQ(1u, s.holders.size());
  const Outcome busy = run(cmd({"run"}, {"--limit", "1", "--wait", "0", "--", "true"}));
  EXPECT_EQ(75, busy.code) << busy;  // opens with the new limit; the one permit is held
  first->close_stdin();
  EXPECT_EQ(0, exit_code(first->wait_exit())) << first->transcript();

  const Outcome same = run(cmd({"resize"}, {"1"}));
  EXPECT_EQ("resized cli: limit 1 -> 1 (unchanged)\n", same.out) << same;
  const Outcome fresh = run(cmd({"resize"}, {"3"}, "fresh"));
  EXPECT_EQ("resized fresh: limit (none stored) -> 3 (the semaphore was not in use)\n", fresh.out)
      << fresh;
  EXPECT_EQ(3, status("fresh").limit);
}

// Owner info is whatever a client stored (here a command line with a newline and an escape
// byte in it): the table shows control bytes as \xNN, so one entry is one line and nothing
// reaches the terminal as a control sequence. JSON escapes them anyway.
TEST_F(CliTest, StatusTableShowsControlBytesInOwnerInfoEscaped) {
  auto p = start(cmd({"run"}, {"--limit", "1", "--", "sh", "-c", "echo ready; read line; true",
                               "line\n\033[2Jtwo"}));
  ASSERT_TRUE(p->expect("ready")) << p->transcript();
  const Outcome table = run(cmd({"status"}));
  ASSERT_EQ(0, table.code) << table;
  EXPECT_NE(std::string::npos, table.out.find(" line\\x0a\\x1b[2Jtwo\n")) << table;
  EXPECT_EQ(std::string::npos, table.out.find('\033')) << table;
  const Outcome json = run(cmd({"status"}, {"--json"}));
  const std::string owner = nlohmann::json::parse(json.out).at("holders").at(0).at("owner");
  EXPECT_NE(std::string::npos, owner.find("line\n\033[2Jtwo")) << json;
  p->close_stdin();
  EXPECT_EQ(0, exit_code(p->wait_exit())) << p->transcript();
}

/// Reads `watch`'s output up to a line that starts with `prefix`; the frame in between, for
/// failure messages, is in the transcript.
bool frame_line(ChildProcess& watch, const std::string& prefix) {
  return watch.expect(prefix, 30s).has_value();
}

TEST_F(CliTest, StatusWatchRedrawsUntilSigintShowingHoldersWithTheirSlots) {
  auto watch = start(cmd({"status"}, {"--watch", "0.1"}, "watched"));
  const std::string summary = "semaphore 'watched' (prefix '" + prefix_ + "'): ";
  ASSERT_TRUE(frame_line(*watch, summary + "not in use")) << watch->transcript();

  SemaphoreOptions options;
  options.limit = 2;
  options.key_prefix = prefix_;
  FairSemaphore sem(test::redis_options(), "watched", options);
  Permit first = sem.acquire();
  Permit second = sem.acquire();
  ASSERT_EQ(1, second.slot());
  ASSERT_EQ(ReleaseResult::released, first.release());
  // A later frame: the one holder left, under its slot 1.
  ASSERT_TRUE(frame_line(*watch, summary + "limit 2, 1 holding")) << watch->transcript();
  ASSERT_TRUE(frame_line(*watch, "  SLOT  ID")) << watch->transcript();
  ASSERT_TRUE(frame_line(*watch, "     1  " + second.id() + " ")) << watch->transcript();

  watch->signal(SIGINT);
  EXPECT_EQ(0, exit_code(watch->wait_exit(10s))) << watch->transcript();
  (void)watch->read_to_eof(10s);  // into the transcript
  const std::string all = watch->transcript();
  // Not a terminal: whole frames, one after the other, each after a "--- TIME ---" line, and
  // no cursor movement.
  EXPECT_NE(std::string::npos, all.find("\n--- 20")) << all;
  EXPECT_EQ(std::string::npos, all.find('\033')) << all;
}

TEST_F(CliTest, StatusWatchEndsAtOnceOnSigtermDuringTheInterval) {
  auto watch = start(cmd({"status"}, {"--watch", "1h"}, "watched"));
  ASSERT_TRUE(frame_line(*watch, "semaphore 'watched'")) << watch->transcript();
  watch->signal(SIGTERM);
  // Not an hour: the signal ends the wait.
  EXPECT_EQ(0, exit_code(watch->wait_exit(10s))) << watch->transcript();
}

// After a good first read, a Redis that goes away is shown in the frame (text) or as an
// {"error"} line (--json), and the watch goes on until Redis is back.
TEST_F(CliTest, StatusWatchShowsRedisTroubleAndKeepsWatching) {
  test::RedisServer server;
  auto text = start(cmd({"status"}, {"--watch", "0.1", "--url", server.url()}, "watched"));
  auto json =
      start(cmd({"status"}, {"--watch", "0.1", "--json", "--url", server.url()}, "watched"));
  const std::string summary = "semaphore 'watched' (prefix '" + prefix_ + "'): ";
  ASSERT_TRUE(frame_line(*text, summary + "not in use")) << text->transcript();
  // Every line a JSON object with the time; the first read ones are status objects.
  const auto next_json = [&](bool want_error) -> std::optional<nlohmann::json> {
    while (auto line = json->read_line(30s)) {
      const auto j = nlohmann::json::parse(*line);
      EXPECT_TRUE(j.at("time").is_string()) << *line;
      EXPECT_EQ("watched", j.at("name")) << *line;
      if (j.contains("error") == want_error) return j;
    }
    return std::nullopt;
  };
  const auto good = next_json(false);
  ASSERT_TRUE(good) << json->transcript();
  EXPECT_EQ(0, good->at("limit")) << *good;
  EXPECT_TRUE(good->at("holders").empty()) << *good;

  server.kill();
  ASSERT_TRUE(frame_line(*text, summary + "cannot read it: ")) << text->transcript();
  ASSERT_TRUE(frame_line(*text, "last read at 20")) << text->transcript();
  const auto bad = next_json(true);
  ASSERT_TRUE(bad) << json->transcript();
  EXPECT_NE(std::string::npos, bad->at("error").get<std::string>().find("127.0.0.1")) << *bad;

  server.start();
  ASSERT_TRUE(frame_line(*text, summary + "not in use")) << text->transcript();
  ASSERT_TRUE(next_json(false)) << json->transcript();
  for (auto* p : {text.get(), json.get()}) {
    p->signal(SIGINT);
    EXPECT_EQ(0, exit_code(p->wait_exit(10s))) << p->transcript();
  }
}

struct BadArguments {
  std::vector<std::string> args;
  std::string message;  // a part of the one-line error
};

TEST_F(CliTest, BadArgumentsExit64WithAClearMessageAndChangeNothing) {
  const long long keys_before = dbsize();
  const auto t = target("untouched");
  auto with = [&](std::initializer_list<std::string> head,
                  std::initializer_list<std::string> tail) {
    std::vector<std::string> v(head);
    v.insert(v.end(), t.begin(), t.end());
    v.insert(v.end(), tail);
    return v;
  };
  const std::vector<BadArguments> cases = {
      {with({"run"}, {"--limit", "0", "--", "true"}),
       "--limit: \"0\" is not a whole number from 1 to 1000000000"},
      {with({"run"}, {"--limit", "true", "--", "true"}), "--limit: \"true\" is not a whole number"},
      {with({"run"}, {"--limit", "2", "--permits", "0x2", "--", "true"}), "--permits: \"0x2\""},
      {with({"run"}, {"--limit", "x", "--", "true"}), "--limit"},
      {with({"run"}, {"--limit", "-3", "--", "true"}), "--limit"},
      {with({"run"}, {"--limit", "1", "--lease", "-1", "--", "true"}),
       "--lease \"-1\" is not a duration (it is negative)"},
      {with({"run"}, {"--limit", "1", "--lease", "0", "--", "true"}), "--lease must be positive"},
      {with({"run"}, {"--limit", "1", "--lease", "10parsecs", "--", "true"}),
       "unknown unit \"parsecs\""},
      {with({"run"}, {"--limit", "1", "--wait", "soon", "--", "true"}), "--wait \"soon\""},
      {with({"run"}, {"--limit", "1", "--on-lost", "ignore", "--", "true"}), "--on-lost"},
      {with({"run"}, {"--limit", "1", "--bogus", "--", "true"}), "--bogus"},
      {with({"run"}, {"--limit", "1", "true"}), "is '--' missing before the command?"},
      {with({"run"}, {"--limit", "1", "--"}), "no command after '--'"},
      {{"run", "--limit", "1", "--", "true"}, "--name is required"},
      {with({"run"}, {"--limit", "1", "--url", "http://127.0.0.1:6379", "--", "true"}), "scheme"},
      {with({"status"}, {"--json", "extra"}), "extra"},
      {with({"evict"}, {}), "--id is required"},
      {with({"evict"}, {"--id", "a b"}), "permit id"},
      {with({"status"}, {"--watch", "0"}), "--watch \"0\": the interval must be positive"},
      {with({"status"}, {"--watch", "-1"}), "--watch \"-1\" is not a duration"},
      {with({"status"}, {"--watch", "soon"}), "--watch \"soon\" is not a duration"},
      {with({"status"}, {"--watch", "0.0001"}), "--watch \"0.0001\" is not a duration"},
      {with({"status"}, {"--watch=0s", "--json"}), "--watch \"0s\": the interval must be positive"},
      {with({"resize"}, {}), "NEW_LIMIT is required"},
      {with({"resize"}, {"0"}), "NEW_LIMIT \"0\" is not a whole number from 1 to 1000000000"},
      {with({"resize"}, {"-3"}), "NEW_LIMIT \"-3\""},
      {with({"resize"}, {"+3"}), "NEW_LIMIT \"+3\""},
      {with({"resize"}, {"2.5"}), "NEW_LIMIT \"2.5\""},
      {with({"resize"}, {"1000000001"}), "NEW_LIMIT \"1000000001\""},
      {with({"resize"}, {"99999999999999999999"}), "NEW_LIMIT \"99999999999999999999\""},
      {with({"resize"}, {"five"}), "NEW_LIMIT \"five\""},
      {with({"resize"}, {"2", "3"}), "3"},
      {{"resize", "--prefix", "x", "redis://u:pw@127.0.0.1:1", "5"}, "looks like a Redis URL"},
      {{"status", "--name", "bad name"}, "semaphore name"},
      {{"launch"}, "launch"},
      {{}, "subcommand"},
      {with({"demo"}, {}), "--name"},
      {{"demo", "--workers", "1"}, "--workers"},
  };
  for (const BadArguments& c : cases) {
    const Outcome o = run(c.args);
    std::string line;
    for (const auto& a : c.args) line += a + " ";
    EXPECT_EQ(64, o.code) << line << "\n" << o;
    EXPECT_NE(std::string::npos, o.err.find(c.message)) << line << "\n" << o;
    EXPECT_NE(std::string::npos, o.err.find("--help")) << line << "\n" << o;
    EXPECT_TRUE(o.out.empty()) << line << "\n" << o;
  }
  EXPECT_EQ(keys_before, dbsize());
}

TEST_F(CliTest, LimitOtherThanTheStoredOneExits64) {
  ASSERT_EQ(0, run(cmd({"run"}, {"--limit", "2", "--", "true"})).code);
  const Outcome o = run(cmd({"run"}, {"--limit", "3", "--", "true"}));
  EXPECT_EQ(64, o.code) << o;
  EXPECT_NE(std::string::npos, o.err.find("Redis stores limit 2")) << o;
}

TEST_F(CliTest, UnreachableRedisExits69WithoutShowingThePassword) {
  const std::string url = "redis://operator:sekret-pw@127.0.0.1:1";
  for (const auto& args : std::vector<std::vector<std::string>>{
           cmd({"run"}, {"--limit", "1", "--url", url, "--", "true"}),
           cmd({"status"}, {"--url", url}), cmd({"evict"}, {"--id", "x", "--url", url}),
           cmd({"status"}, {"--watch", "0.1", "--url", url}),  // the first read must succeed
           cmd({"resize"}, {"2", "--url", url})}) {
    const Outcome o = run(args);
    EXPECT_EQ(69, o.code) << o;
    EXPECT_NE(std::string::npos, o.err.find("127.0.0.1:1")) << o;
    EXPECT_EQ(std::string::npos, o.err.find("sekret")) << o;
    EXPECT_EQ(std::string::npos, o.out.find("sekret")) << o;
  }
  // From the environment too, and with the URL quoted in a parse error.
  const Outcome env = run(cmd({"status"}, {}), {{"FAIRSEM_URL", url}});
  EXPECT_EQ(69, env.code) << env;
  EXPECT_EQ(std::string::npos, env.err.find("sekret")) << env;
  const Outcome bad = run(cmd({"status"}, {"--url", "redis://operator:sekret-pw@"}));
  EXPECT_EQ(64, bad.code) << bad;
  EXPECT_EQ(std::string::npos, bad.err.find("sekret")) << bad;
}

TEST_F(CliTest, RefusedLoginExits69WithoutShowingThePassword) {
  const std::string user = "cli-" + std::to_string(getpid());
  admin_.command({"ACL", "SETUSER", user, "on", ">right-password", "~*", "+@all"});
  const std::string url = fairsem::test::test_url(
      user + ":wrong-password@127.0.0.1:" + std::to_string(fairsem::test::redis_options().port));
  const Outcome o = run(cmd({"status"}, {"--url", url}));
  admin_.command({"ACL", "DELUSER", user});
  EXPECT_EQ(69, o.code) << o;
  EXPECT_EQ(std::string::npos, o.err.find("wrong-password")) << o;
}

// A server that wants a password, and a URL without one: refused like a login (69), for the
// command that opens a semaphore (its first script call has more than 10 arguments, which Redis
// refuses unauthenticated with a protocol error rather than NOAUTH) and for status.
TEST_F(CliTest, AMissingPasswordExits69) {
  test::RedisServer server({"--requirepass", "needed-pw"});
  const std::string url = server.url();
  for (const auto& args : {cmd({"status"}, {"--url", url}),
                           cmd({"run"}, {"--limit", "1", "--url", url, "--", "true"})}) {
    const Outcome o = run(args);
    EXPECT_EQ(69, o.code) << o;
    EXPECT_NE(std::string::npos, o.err.find("requires authentication")) << o;
  }
}

constexpr const char* kAclPassword = "s3cr3t-pw-9q1z";

/// True if the output holds a piece of kAclPassword (or of its percent-encoded form).
bool shows_password(const Outcome& o) {
  for (const char* piece : {"s3cr3t", "9q1z"}) {
    if (o.out.find(piece) != std::string::npos || o.err.find(piece) != std::string::npos) {
      return true;
    }
  }
  return false;
}

// An operator's user with only the documented ACL rule (tests/support/acl_rule.hpp) runs,
// shows and evicts; outside its keys it is refused like a login (69). Nothing shows its password.
TEST_F(CliTest, RestrictedAclUserCanRunShowAndEvict) {
  test::RedisServer server;
  detail::Connection server_admin(ConnectionOptions::from_url(server.url()));
  test::set_acl_user(server_admin, "fairsem-app", kAclPassword);
  const std::string url = fairsem::test::test_url(std::string("fairsem-app:") + kAclPassword +
                                                  "@127.0.0.1:" + std::to_string(server.port()));
  const std::string name = "acl-cli";
  auto with = [&](std::initializer_list<std::string> head,
                  std::initializer_list<std::string> tail) {
    std::vector<std::string> v(head);
    for (const std::string& word : {std::string("--name"), name, std::string("--url"), url}) {
      v.push_back(word);
    }
    v.insert(v.end(), tail);
    return v;
  };
  auto admin_status = [&] {
    return SemaphoreAdmin(ConnectionOptions::from_url(url), name).status();
  };

  auto holder =
      start(with({"run"}, {"--limit", "1", "--", "sh", "-c", "echo ready; read line; echo done"}));
  ASSERT_TRUE(holder->expect("ready")) << holder->transcript();
  auto waiter = start({"run", "--name", name, "--limit", "1", "--", "true"},
                      {{"FAIRSEM_URL", url}});  // the URL from the environment this time
  ASSERT_TRUE(wait_until([&] { return admin_status().waiters.size() == 1; }));

  std::vector<Outcome> outcomes;
  outcomes.push_back(run(with({"status"}, {"--json"})));
  ASSERT_EQ(0, outcomes.back().code) << outcomes.back();
  const auto j = nlohmann::json::parse(outcomes.back().out);
  ASSERT_EQ(1u, j.at("holders").size());
  ASSERT_EQ(1u, j.at("waiters").size());
  outcomes.push_back(run({"status", "--name", name}, {{"FAIRSEM_URL", url}}));
  EXPECT_EQ(0, outcomes.back().code) << outcomes.back();
  EXPECT_NE(std::string::npos, outcomes.back().out.find("limit 1, 1 holding 1 unit, 1 waiting"))
      << outcomes.back();

  const std::string waiter_id = j.at("waiters").at(0).at("id");
  outcomes.push_back(run(with({"evict"}, {"--id", waiter_id})));
  EXPECT_EQ(0, outcomes.back().code) << outcomes.back();
  EXPECT_NE(std::string::npos, outcomes.back().out.find("evicted waiter " + waiter_id))
      << outcomes.back();
  EXPECT_EQ(75, exit_code(waiter->wait_exit())) << waiter->transcript();
  holder->close_stdin();
  EXPECT_EQ(0, exit_code(holder->wait_exit())) << holder->transcript();
  EXPECT_TRUE(admin_status().holders.empty());

  outcomes.push_back(run(with({"status"}, {"--prefix", "other"})));
  EXPECT_EQ(69, outcomes.back().code) << outcomes.back();
  EXPECT_NE(std::string::npos, outcomes.back().err.find("NOPERM")) << outcomes.back();
  // The only refusal Redis logged is that one: everything else was within the rule.
  for (const detail::Reply& entry : server_admin.command({"ACL", "LOG"}).elements) {
    for (std::size_t i = 0; i + 1 < entry.elements.size(); i += 2) {
      if (entry.elements[i].str == "object") {
        EXPECT_EQ(0u, entry.elements[i + 1].str.rfind("other:", 0)) << entry.elements[i + 1].str;
      }
    }
  }

  for (const Outcome& o : outcomes) EXPECT_FALSE(shows_password(o)) << o;
  for (auto* p : {holder.get(), waiter.get()}) {
    EXPECT_FALSE(shows_password({0, p->transcript(), p->stderr_text()})) << p->transcript();
  }
}

// Usage errors quote what was typed: a URL given where an option was expected, or malformed, is
// quoted without its password (plain or percent-encoded), and so is an unreachable one.
TEST_F(CliTest, UsageErrorsAndFailuresNeverEchoThePassword) {
  const std::string url = std::string("redis://u:") + kAclPassword + "@127.0.0.1:1";
  const std::string encoded = "redis://u:s3cr3t%2Dpw%2D9q1z@127.0.0.1:1";
  const std::vector<std::vector<std::string>> usage_errors = {
      {"status", "--url", url, "--bogus"},
      {"status", "--name", "x", "--url", url, "--bogus"},
      {"status", "--name", "x", "--url=" + url, "--json", "extra"},
      {"status", "--name", "x", url},  // --url forgotten
      {"status", "--name", "x", "--url", url, "--url", encoded},
      {"evict", "--name", "x", "--url", encoded},
      {url, "status", "--name", "x"},
      {"run", "--name", "x", "--limit", "1", url, "--", "true"},
      {"run", "--name", "x", "--limit", "1", "--url", url, "true"},
      {"run", "--name", "x", "--limit", url, "--", "true"},
      {"run", "--name", "x", "--limit", "1", "--lease", "soon", "--url", url, "--", "true"},
      {"run", "--name", "x", "--limit", "1", "--url", "redis://u:s3cr3t/pw-9q1z", "--", "true"},
      {"run", "--name", "x", "--limit", "1", "--url", "redis://u:s3cr3t-pw-9q1z@", "--", "true"},
      {"run", "--name", "x", "--limit", "1", "--url", "redis://u:s3cr3t%zz9q1z@h", "--", "true"},
      {"demo", "--url", "redis://u:s3cr3t:pw-9q1z"},
      {"resize", url, "5"},  // the URL where NAME goes
      {"resize", "x", url},
      {"run", "--name", "x", "--limit", "1", "--lease", url, "--", "true"},  // or a duration
      {"demo", "--lease", url},
      {"status", "--name", "x", "--watch", url},
  };
  for (const auto& args : usage_errors) {
    const Outcome o = run(args);
    std::string line;
    for (const auto& a : args) line += a + " ";
    EXPECT_EQ(64, o.code) << line << "\n" << o;
    EXPECT_FALSE(shows_password(o)) << line << "\n" << o;
  }
  for (const std::string& unreachable : {url, encoded}) {
    const Outcome o = run({"status", "--name", "x", "--url", unreachable});
    EXPECT_EQ(69, o.code) << o;
    EXPECT_FALSE(shows_password(o)) << o;
  }
}

TEST_F(CliTest, DemoOnAPrivateRedisShowsEveryGuaranteeHeld) {
  const Outcome o =
      run({"demo", "--workers", "4", "--limit", "2", "--seconds", "5", "--lease", "1s"},
          {{"FAIRSEM_URL", "redis://127.0.0.1:1"}});  // not used by the demo
  EXPECT_EQ(0, o.code) << o;
  EXPECT_NE(std::string::npos, o.out.find("private redis-server started on redis://127.0.0.1:"))
      << o;
  EXPECT_NE(std::string::npos, o.out.find("SIGKILL worker-")) << o;
  for (const char* line : {"max simultaneous holders", "FIFO order violations      0  ok",
                           "killed holder's permit     reclaimed",
                           "left in Redis              0 holders, 0 waiters  ok"}) {
    EXPECT_NE(std::string::npos, o.out.find(line)) << line << "\n" << o;
  }
  EXPECT_EQ(std::string::npos, o.out.find("FAILED")) << o;
  // Plain lines when stdout is not a terminal: no cursor movement.
  EXPECT_EQ(std::string::npos, o.out.find("\033[")) << o;
}

}  // namespace
}  // namespace fairsem
