// `fairsem list`, driven as a user drives it: every semaphore under a prefix as a table and as
// JSON, what each holds and queues, --match, an empty listing, and a bad pattern refused.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_fixture.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using test::CliTest;
using test::exit_code;
using test::Outcome;
using test::wait_until;

TEST_F(CliTest, ListShowsEverySemaphoreUnderThePrefixAsATableAndAsJson) {
  auto holder_process = holder({}, "alpha");
  auto waiter = start(cmd({"run"}, {"--limit", "1", "--", "true"}, "alpha"));
  ASSERT_TRUE(wait_until([&] { return status("alpha").waiters.size() == 1; }));
  ASSERT_EQ(0, run(cmd({"run"}, {"--limit", "3", "--", "true"}, "beta")).code);

  const Outcome json = run({"list", "--prefix", prefix_, "--json"});
  ASSERT_EQ(0, json.code) << json;
  const auto all = nlohmann::json::parse(json.out);
  ASSERT_EQ(2u, all.size()) << json;
  const auto& alpha = all.at(0);
  EXPECT_EQ("alpha", alpha.at("name"));
  EXPECT_EQ(1, alpha.at("limit"));
  EXPECT_EQ(1, alpha.at("held"));
  EXPECT_EQ(1, alpha.at("holders"));
  EXPECT_EQ(1, alpha.at("waiting"));
  EXPECT_EQ(0, alpha.at("idle_seconds"));  // in use
  // Two tickets: a new counter starts at the server's clock times 1024.
  EXPECT_EQ(status("alpha").holders.at(0).ticket + 1, alpha.at("counter"));
  EXPECT_EQ(admin_.endpoint(), alpha.at("node"));
  const auto& beta = all.at(1);
  EXPECT_EQ("beta", beta.at("name"));
  EXPECT_EQ(3, beta.at("limit"));
  EXPECT_EQ(0, beta.at("held"));
  EXPECT_EQ(0, beta.at("waiting"));
  // nlohmann::json keeps keys sorted.
  const std::vector<std::string> keys = {"counter", "held", "holders", "idle_seconds",
                                         "limit",   "name", "node",    "waiting"};
  std::vector<std::string> seen;
  for (auto it = beta.begin(); it != beta.end(); ++it) seen.push_back(it.key());
  EXPECT_EQ(keys, seen);

  const Outcome table = run({"list", "--prefix", prefix_});
  ASSERT_EQ(0, table.code) << table;
  EXPECT_EQ(0u, table.out.find("NAME    LIMIT    HELD  HOLDERS  WAITING      IDLE  NODE\n"))
      << table;
  EXPECT_NE(std::string::npos,
            table.out.find("\nalpha       1       1        1        1        0s  " +
                           admin_.endpoint() + "\n"))
      << table;
  EXPECT_NE(std::string::npos, table.out.find("\nbeta        3       0        0        0  "))
      << table;

  const Outcome matched = run({"list", "--prefix", prefix_, "--match", "b*", "--json"});
  ASSERT_EQ(0, matched.code) << matched;
  ASSERT_EQ(1u, nlohmann::json::parse(matched.out).size()) << matched;

  const Outcome none = run({"list", "--prefix", prefix_ + "-unused"});
  EXPECT_EQ(0, none.code) << none;
  EXPECT_EQ("no semaphore under prefix '" + prefix_ + "-unused' matches '*'\n", none.out);
  EXPECT_EQ("[]\n", run({"list", "--prefix", prefix_ + "-unused", "--json"}).out);

  for (auto* p : {holder_process.get(), waiter.get()}) {
    p->close_stdin();
    EXPECT_EQ(0, exit_code(p->wait_exit())) << p->transcript();
  }
}

TEST_F(CliTest, ListWithABadPatternExits64NamingIt) {
  const Outcome bad = run({"list", "--prefix", prefix_, "--match", "a{b"});
  EXPECT_EQ(64, bad.code) << bad;
  EXPECT_NE(std::string::npos, bad.err.find("match pattern \"a{b\"")) << bad;
  EXPECT_EQ("", bad.out);
}

}  // namespace
}  // namespace fairsem
