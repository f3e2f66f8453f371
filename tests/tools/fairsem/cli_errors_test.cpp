// The installed `fairsem`, refusing what is wrong: bad arguments (exit 64, nothing changed), an
// exporter address it cannot listen on (64), a limit other than the stored one, an unreachable
// or refusing Redis (exit 69), a server that hangs under `run` (75 at once), a restricted ACL
// user, a password never echoed; and the demo on a private Redis.

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
#include "loopback.hpp"
#include "redis_server.hpp"
#include "stopped.hpp"
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
      {with({"run"}, {"--limit", "1", "--tenant", "a\x01", "--", "true"}),
       "--tenant: \"a\\x01\" is not a tenant: it has a control byte"},
      {with({"run"}, {"--limit", "1", "--tenant", std::string(201, 't'), "--", "true"}),
       "is not a tenant: it is 201 bytes long, at most 200"},
      {with({"tenant"}, {"a", "0"}),
       "WEIGHT: \"0\" is not a whole number from 1 to 9007199254740992"},
      {with({"tenant"}, {"a", "-2"}), "WEIGHT: \"-2\""},
      {with({"tenant"}, {"a", "1.5"}), "WEIGHT: \"1.5\""},
      {with({"tenant"}, {"a", "9007199254740993"}), "WEIGHT: \"9007199254740993\""},
      {with({"tenant"}, {"a"}), "WEIGHT is missing after TENANT \"a\""},
      {with({"tenant"}, {"a\n", "2"}), "TENANT: \"a\\x0a\" is not a tenant"},
      {{"tenant", "--prefix", "x", "redis://u:pw@127.0.0.1:1"}, "looks like a Redis URL"},
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

// An address the exporter cannot listen on is the caller's to fix: a usage error naming it,
// not an internal error from the HTTP server it could not start.
TEST_F(CliTest, ExporterThatCannotListenExits64NamingTheAddress) {
  int port = 0;
  const int taken = test::listen_on_loopback(port, 0, "the port in use");
  const std::string in_use = "127.0.0.1:" + std::to_string(port);
  const std::vector<BadArguments> cases = {
      {{"exporter", "--listen", "nonsense"}, "--listen \"nonsense\" is not HOST:PORT"},
      {{"exporter", "--listen", "127.0.0.1:65536"}, "--listen \"127.0.0.1:65536\" is not"},
      {{"exporter", "--listen", "127.0.0.1:"}, "--listen \"127.0.0.1:\" is not"},
      {{"exporter", "--listen", in_use}, "--listen \"" + in_use + "\": cannot listen there"},
  };
  for (const BadArguments& c : cases) {
    const Outcome o = run(c.args);
    if (o.err.find("built without prometheus-cpp") != std::string::npos) {
      ::close(taken);
      GTEST_SKIP() << "this fairsem has no exporter";
    }
    EXPECT_EQ(64, o.code) << c.args.back() << "\n" << o;
    EXPECT_NE(std::string::npos, o.err.find(c.message)) << c.args.back() << "\n" << o;
    EXPECT_EQ(std::string::npos, o.err.find("internal error")) << o;
    EXPECT_TRUE(o.out.empty()) << o;
  }
  ::close(taken);
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

// The server hangs (SIGSTOP): the lease runs out, the command is terminated, and `fairsem run`
// exits 75 at once. Before, it first tried to release the lost permit on the hung server and
// waited three command timeouts (6 s) for nothing.
TEST_F(CliTest, LostToAHungServerWithOnLostKillExits75WithoutWaitingForTheServer) {
  test::RedisServer server;
  auto p = start(cmd({"run"}, {"--url", server.url(), "--limit", "1", "--lease", "1s", "--on-lost",
                               "kill", "--", "sh", "-c",
                               "trap 'echo got-TERM; exit 0' TERM; echo ready; "
                               "i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done"}));
  ASSERT_TRUE(p->expect("ready")) << p->transcript();
  const test::Stopped hung(server.pid());
  ASSERT_TRUE(p->expect("got-TERM")) << p->transcript() << p->stderr_text();
  const auto terminated = std::chrono::steady_clock::now();
  EXPECT_EQ(75, exit_code(p->wait_exit())) << p->transcript();
  // Well within one command timeout (2 s) of its command's end: no call to the hung server.
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - terminated);
  EXPECT_LT(waited.count(), 2000) << p->stderr_text();
  EXPECT_NE(std::string::npos, p->stderr_text().find("lost")) << p->stderr_text();
  EXPECT_EQ(std::string::npos, p->stderr_text().find("releasing permit")) << p->stderr_text();
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
