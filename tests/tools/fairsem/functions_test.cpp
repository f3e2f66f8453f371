// `fairsem functions list|prune`, driven as a user drives it: each fairsem library on the node
// with its version, as a table and as JSON; a dry run that deletes nothing; a prune that keeps
// this version's library only; a bad action refused.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_fixture.hpp"
#include "fairsem/impl/protocol/scripts.hpp"
#include "script_command.hpp"

namespace fairsem {
namespace {

using test::CliTest;
using test::Outcome;

TEST_F(CliTest, FunctionsListsEachVersionsLibraryAndPruneKeepsOnlyThisVersions) {
  if (!test::has_functions(admin_)) {
    // Redis 6.2: fairsem runs on EVALSHA there, and has no library to show.
    const Outcome none = run({"functions", "list"});
    EXPECT_EQ(0, none.code) << none;
    EXPECT_EQ("no fairsem function library is loaded\n", none.out);
    return;
  }
  admin_.command({"FUNCTION", "FLUSH"});
  ASSERT_EQ(0, run(cmd({"run"}, {"--limit", "1", "--", "true"}, "f")).code);  // loads it
  const std::string current(detail::scripts::semaphore_library.name);
  const std::string old = "fairsem_0123456789ab";  // a version that recorded no version
  admin_.command({"FUNCTION", "LOAD",
                  "#!lua name=" + old + "\nredis.register_function('" + old +
                      "_f', function() return 1 end)"});
  const std::string node = admin_.endpoint();

  const Outcome json = run({"functions", "list", "--json"});
  ASSERT_EQ(0, json.code) << json;
  const auto all = nlohmann::json::parse(json.out);
  ASSERT_EQ(2u, all.size()) << json;
  EXPECT_EQ(current, all.at(0).at("library"));
  EXPECT_EQ(version(), all.at(0).at("version").get<std::string>());
  EXPECT_EQ(detail::scripts::semaphore_scripts.size(), all.at(0).at("functions"));
  EXPECT_EQ(true, all.at(0).at("current"));
  EXPECT_EQ(node, all.at(0).at("node"));
  EXPECT_EQ(old, all.at(1).at("library"));
  EXPECT_TRUE(all.at(1).at("version").is_null());
  EXPECT_EQ(false, all.at(1).at("current"));

  const Outcome table = run({"functions", "list"});
  ASSERT_EQ(0, table.code) << table;
  const std::string pad(node.size() - 4, ' ');
  EXPECT_EQ("NODE" + pad + "  LIBRARY               VERSION    FUNCTIONS\n" + node + "  " +
                current + "  " + fmt::format("{:<9}", version()) +
                "          8  (this version's)\n" + node + "  " + old + "  unknown            1\n",
            table.out);

  const std::string line = old + " (version unknown) on " + node + "\n";
  const Outcome dry = run({"functions", "prune", "--dry-run"});
  ASSERT_EQ(0, dry.code) << dry;
  EXPECT_EQ("would delete " + line + "1 library to delete; this version's library kept\n", dry.out);
  EXPECT_EQ(2u, admin_.command({"FUNCTION", "LIST"}).elements.size());

  const Outcome pruned = run({"functions", "prune"});
  ASSERT_EQ(0, pruned.code) << pruned;
  EXPECT_EQ("deleted " + line + "1 library deleted; this version's library kept\n", pruned.out);
  const auto left = nlohmann::json::parse(run({"functions", "list", "--json"}).out);
  ASSERT_EQ(1u, left.size());
  EXPECT_EQ(current, left.at(0).at("library"));
  EXPECT_EQ("0 libraries deleted; this version's library kept\n", run({"functions", "prune"}).out);
}

TEST_F(CliTest, FunctionsWithAnUnknownActionExits64NamingIt) {
  const Outcome bad = run({"functions", "drop"});
  EXPECT_EQ(64, bad.code) << bad;
  EXPECT_NE(std::string::npos, bad.err.find("drop")) << bad;
  EXPECT_EQ("", bad.out);
  EXPECT_EQ(64, run({"functions"}).code);
}

}  // namespace
}  // namespace fairsem
