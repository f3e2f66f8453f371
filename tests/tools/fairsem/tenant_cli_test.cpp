// The installed `fairsem` with tenants: `run --tenant`, `fairsem tenant` setting and showing
// weights, and what `status` and `list` show of a semaphore's tenants (and, of one without
// tenants, exactly what they showed before).

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "cli_fixture.hpp"
#include "fairsem/fairsem.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using test::ChildProcess;
using test::CliTest;
using test::exit_code;
using test::Outcome;
using test::wait_until;

/// Tests with a semaphore "`name`" of limit 1: tenant a holds it, tenant b waits for it.
class TenantCliTest : public CliTest {
 protected:
  void hold_and_queue(const std::string& name) {
    holding_ = holder({"--tenant", "a"}, name);
    waiting_ = start(cmd({"run"}, {"--limit", "1", "--tenant", "b", "--", "true"}, name));
    ASSERT_TRUE(wait_until([&] { return status(name).waiters.size() == 1; }));
  }
  void TearDown() override {
    for (auto* p : {holding_.get(), waiting_.get()}) {
      if (p == nullptr) continue;
      p->close_stdin();
      EXPECT_EQ(0, exit_code(p->wait_exit())) << p->transcript();
    }
  }

  std::unique_ptr<ChildProcess> holding_;
  std::unique_ptr<ChildProcess> waiting_;
};

TEST_F(TenantCliTest, RunAsksForTheTenantItIsGiven) {
  hold_and_queue("named");
  const Status s = status("named");
  ASSERT_EQ(1u, s.holders.size());
  EXPECT_EQ("a", s.holders[0].tenant);
  ASSERT_EQ(1u, s.waiters.size());
  EXPECT_EQ("b", s.waiters[0].tenant);
}

TEST_F(TenantCliTest, TenantSetsAWeightSayingTheOldOneAndShowsEveryTenant) {
  const Outcome set = run(cmd({"tenant"}, {"b", "3"}, "weighted"));
  ASSERT_EQ(0, set.code) << set;
  EXPECT_EQ("tenant b of weighted: weight 1 -> 3\n", set.out);
  EXPECT_EQ("tenant b of weighted: weight 3 -> 3 (unchanged)\n",
            run(cmd({"tenant"}, {"b", "3"}, "weighted")).out);
  // "": the default tenant.
  EXPECT_EQ("tenant (default) of weighted: weight 1 -> 2\n",
            run(cmd({"tenant"}, {"", "2"}, "weighted")).out);
  hold_and_queue("weighted");
  Status s = status("weighted");
  ASSERT_EQ(3u, s.tenants.size());
  EXPECT_EQ(2, s.tenants[0].weight);
  EXPECT_EQ(3, s.tenants[2].weight);

  const Outcome shown = run({"tenant", "weighted", "--prefix", prefix_});  // NAME positional
  ASSERT_EQ(0, shown.code) << shown;
  EXPECT_EQ(0u, shown.out.find("semaphore 'weighted' (prefix '" + prefix_ +
                               "'): limit 1, 3 tenants\n"
                               "  TENANT     WEIGHT    HELD  HOLDERS  WAITING  WAITERS  "
                               "OLDEST WAIT\n"
                               "  (default)       2       0        0        0        0"
                               "            -\n"
                               "  a               1       1        1        0        0"
                               "            -\n"
                               "  b               3       0        0        1        1  "))
      << shown;
  EXPECT_EQ(std::string::npos, shown.out.find("-\n", shown.out.find("\n  b "))) << shown;

  const Outcome json = run(cmd({"tenant"}, {"--json"}, "weighted"));
  ASSERT_EQ(0, json.code) << json;
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ("weighted", j.at("name"));
  const auto& b = j.at("tenants").at(2);
  EXPECT_EQ("b", b.at("name"));
  EXPECT_EQ(3, b.at("weight"));
  EXPECT_EQ(0, b.at("held"));
  EXPECT_EQ(1, b.at("waiting"));
  EXPECT_EQ(1, b.at("waiters"));
  EXPECT_GE(b.at("oldest_wait_ms").get<long long>(), 0) << json;
  EXPECT_TRUE(j.at("tenants").at(1).at("oldest_wait_ms").is_null()) << json;

  const Outcome reset = run(cmd({"tenant"}, {"b", "1", "--json"}, "weighted"));
  EXPECT_EQ(R"({"name":"weighted","tenant":"b","old_weight":3,"weight":1})"
            "\n",
            reset.out)
      << reset;
  s = status("weighted");
  EXPECT_EQ(1, s.tenants.at(2).weight);
}

TEST_F(TenantCliTest, TenantOfASemaphoreWithoutAnySaysSo) {
  const Outcome none = run(cmd({"tenant"}, {}, "unused"));
  EXPECT_EQ(0, none.code) << none;
  EXPECT_EQ("semaphore 'unused' (prefix '" + prefix_ +
                "'): no tenant holds, waits or has a weight stored\n",
            none.out);
}

TEST_F(TenantCliTest, StatusShowsEachTenantOnlyWhereTheSemaphoreHasTenants) {
  hold_and_queue("shared");
  const Outcome table = run(cmd({"status"}, {}, "shared"));
  ASSERT_EQ(0, table.code) << table;
  EXPECT_NE(std::string::npos,
            table.out.find("\ntenants (weighted fair queuing between them):\n"
                           "  TENANT  WEIGHT    HELD  HOLDERS  WAITING  WAITERS  OLDEST WAIT\n"
                           "  a            1       1        1        0        0            -\n"
                           "  b            1       0        0        1        1  "))
      << table;
  EXPECT_NE(std::string::npos, table.out.find("LEASE LEFT  TENANT  OWNER\n")) << table;
  EXPECT_NE(std::string::npos, table.out.find("WAITED  TENANT  OWNER\n")) << table;
  const Outcome json = run(cmd({"status"}, {"--json"}, "shared"));
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ("a", j.at("holders").at(0).at("tenant")) << json;
  EXPECT_EQ("b", j.at("waiters").at(0).at("tenant")) << json;
  ASSERT_EQ(2u, j.at("tenants").size()) << json;
  EXPECT_EQ(1, j.at("tenants").at(1).at("waiting")) << json;

  // Without tenants: no tenants table, column or key.
  auto plain = holder({}, "plain");
  const Outcome plain_table = run(cmd({"status"}, {}, "plain"));
  EXPECT_EQ(std::string::npos, plain_table.out.find("TENANT")) << plain_table;
  const auto pj = nlohmann::json::parse(run(cmd({"status"}, {"--json"}, "plain")).out);
  EXPECT_FALSE(pj.contains("tenants"));
  EXPECT_FALSE(pj.at("holders").at(0).contains("tenant"));
  // A weight stored for the default tenant gives it tenants to show.
  ASSERT_EQ(0, run(cmd({"tenant"}, {"", "2"}, "plain")).code);
  const Outcome weighted = run(cmd({"status"}, {}, "plain"));
  EXPECT_NE(std::string::npos, weighted.out.find("\n  (default)       2       1        1  "))
      << weighted;
  EXPECT_NE(std::string::npos, weighted.out.find("LEASE LEFT  TENANT     OWNER\n")) << weighted;
  EXPECT_NE(std::string::npos, weighted.out.find("  (default)  ", weighted.out.find("holders:")))
      << weighted;
  plain->close_stdin();
  EXPECT_EQ(0, exit_code(plain->wait_exit())) << plain->transcript();

  // Weights stored before the semaphore's first use are shown too.
  ASSERT_EQ(0, run(cmd({"tenant"}, {"early", "4"}, "fresh")).code);
  EXPECT_NE(std::string::npos, run(cmd({"status"}, {}, "fresh"))
                                   .out.find("not in use (no limit stored, nobody queued)\n"
                                             "tenants:\n  TENANT  WEIGHT"));
}

TEST_F(TenantCliTest, ListShowsTheTenantsOfTheSemaphoresThatHaveThem) {
  hold_and_queue("shared");
  ASSERT_EQ(0, run(cmd({"run"}, {"--limit", "3", "--", "true"}, "zplain")).code);
  const Outcome table = run({"list", "--prefix", prefix_});
  ASSERT_EQ(0, table.code) << table;
  const std::string node = admin_.endpoint();
  EXPECT_EQ(
      "NAME     LIMIT    HELD  HOLDERS  WAITING      IDLE  NODE\n"
      "shared       1       1        1        1        0s  " +
          node +
          "\n"
          "    TENANT  WEIGHT    HELD  HOLDERS  WAITING  WAITERS  OLDEST WAIT\n"
          "    a            1       1        1        0        0            -\n",
      table.out.substr(0, table.out.find("    b  ")))
      << table;
  EXPECT_NE(std::string::npos, table.out.find("\nzplain       3       0        0        0  "))
      << table;
  // Nothing under zplain's line: it has no tenants.
  EXPECT_EQ(table.out.size(), table.out.find('\n', table.out.find("\nzplain") + 1) + 1) << table;

  const auto all = nlohmann::json::parse(run({"list", "--prefix", prefix_, "--json"}).out);
  ASSERT_EQ(2u, all.size());
  const auto& tenants = all.at(0).at("tenants");
  ASSERT_EQ(2u, tenants.size());
  EXPECT_EQ("a", tenants.at(0).at("name"));
  EXPECT_EQ(1, tenants.at(0).at("held"));
  EXPECT_EQ("b", tenants.at(1).at("name"));
  EXPECT_EQ(1, tenants.at(1).at("waiting"));
  EXPECT_FALSE(all.at(1).contains("tenants"));
}

}  // namespace
}  // namespace fairsem
