// The installed `fairsem status` (as JSON, as a table, --watch) and `fairsem resize`, driven as a
// user drives them.

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
  // Tokens: a new counter starts at the server's clock times 1024, then one each.
  const long long first = j.at("holders").at(0).at("token").get<long long>();
  EXPECT_GT(first, 1000000000000000LL);
  EXPECT_EQ(first + 2, j.at("counter"));
  ASSERT_EQ(1u, j.at("holders").size());
  const auto& h = j.at("holders").at(0);
  EXPECT_EQ(0, h.at("slot"));
  EXPECT_GT(h.at("lease_left_ms").get<long long>(), 0);
  EXPECT_NE(std::string::npos, h.at("owner").get<std::string>().find("sh -c")) << json;
  ASSERT_EQ(2u, j.at("waiters").size());
  EXPECT_EQ(first + 1, j.at("waiters").at(0).at("token"));
  EXPECT_EQ(first + 2, j.at("waiters").at(1).at("token"));
  EXPECT_TRUE(j.at("waiters").at(0).at("slot").is_null()) << json;  // waiters have no slot
  EXPECT_TRUE(h.at("waited_ms").is_null()) << json;                 // a holder waits no more
  // The first waiter queued first: it has waited at least as long as the second, by the one
  // server clock the status call read.
  const long long second_waited = j.at("waiters").at(1).at("waited_ms").get<long long>();
  EXPECT_GE(second_waited, 0) << json;
  EXPECT_GE(j.at("waiters").at(0).at("waited_ms").get<long long>(), second_waited) << json;
  const std::vector<std::string> keys = {"id",    "token",         "units",     "slot",
                                         "slots", "lease_left_ms", "waited_ms", "owner"};
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
  EXPECT_NE(std::string::npos,
            table.out.find("limit 1, 1 holding 1 unit, 2 waiting, newest token " +
                           std::to_string(first + 2)))
      << table;
  // The holder's row starts with its slot, under SLOT; the waiters' with their place in line.
  const std::string holder_id = h.at("id");
  EXPECT_NE(std::string::npos, table.out.find("holders:\n  SLOT  ID")) << table;
  EXPECT_NE(std::string::npos, table.out.find("\n     0  " + holder_id + " ")) << table;
  EXPECT_NE(std::string::npos, table.out.find("waiters, in queue order:\n     #  ID")) << table;
  EXPECT_NE(std::string::npos, table.out.find("LEASE LEFT      WAITED  OWNER\n")) << table;
  // Only the waiters' table has it.
  const std::string holders_table = table.out.substr(0, table.out.find("waiters, in queue order"));
  EXPECT_EQ(std::string::npos, holders_table.find("WAITED")) << table;
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

}  // namespace
}  // namespace fairsem
