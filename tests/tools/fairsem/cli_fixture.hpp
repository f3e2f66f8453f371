#pragma once

// What the tests of the installed `fairsem` command share: running it against the test's Redis
// and reading what it printed and how it exited.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <initializer_list>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "test_env.hpp"

#ifndef FAIRSEM_CLI
#error "FAIRSEM_CLI (the installed fairsem binary) must be defined by the build"
#endif

namespace fairsem::test {

/// The exit code; 1000+N if the process was killed by signal N (fairsem itself never should
/// be), -1 if it did not exit in time.
inline int exit_code(const std::optional<int>& status) {
  if (!status) return -1;
  if (WIFEXITED(*status)) return WEXITSTATUS(*status);
  return 1000 + WTERMSIG(*status);
}

struct Outcome {
  int code = -1;
  std::string out;
  std::string err;
};

inline std::ostream& operator<<(std::ostream& os, const Outcome& o) {
  return os << "exit " << o.code << "\n--- stdout ---\n" << o.out << "--- stderr ---\n" << o.err;
}

class CliTest : public ::testing::Test {
 protected:
  /// Starts `fairsem args...` with FAIRSEM_URL pointing at the test's Redis.
  std::unique_ptr<ChildProcess> start(std::vector<std::string> args,
                                      std::map<std::string, std::string> env = {}) {
    args.insert(args.begin(), FAIRSEM_CLI);
    env.emplace("FAIRSEM_URL", RedisEnvironment::instance().url());
    return std::make_unique<ChildProcess>(args, env);
  }

  /// Runs `fairsem args...` to the end, with nothing on its stdin.
  Outcome run(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    auto p = start(std::move(args), std::move(env));
    p->close_stdin();
    Outcome o;
    o.out = p->read_to_eof();
    o.code = exit_code(p->wait_exit());
    o.err = p->stderr_text();
    return o;
  }

  /// The target options every command takes: this test's name and key prefix.
  std::vector<std::string> target(const std::string& name = "cli") const {
    return {"--name", name, "--prefix", prefix_};
  }
  std::vector<std::string> cmd(std::initializer_list<std::string> head,
                               std::initializer_list<std::string> tail = {},
                               const std::string& name = "cli") const {
    std::vector<std::string> v(head);
    for (const std::string& t : target(name)) v.push_back(t);
    v.insert(v.end(), tail);
    return v;
  }

  Status status(const std::string& name = "cli") {
    return SemaphoreAdmin(test::redis_options(), name, prefix_).status();
  }

  /// A `fairsem run` whose command says "ready" and then waits for its stdin to close.
  std::unique_ptr<ChildProcess> holder(std::vector<std::string> extra = {},
                                       const std::string& name = "cli") {
    std::vector<std::string> args = cmd({"run"}, {"--limit", "1"}, name);
    args.insert(args.end(), extra.begin(), extra.end());
    for (const char* word : {"--", "sh", "-c", "echo ready; read line; echo done"}) {
      args.push_back(word);
    }
    auto p = start(args);
    EXPECT_TRUE(p->expect("ready")) << p->transcript();
    return p;
  }

  long long dbsize() { return admin_.command({"DBSIZE"}).integer; }

  const std::string prefix_ = test::unique_prefix();
  detail::Connection admin_{test::redis_options()};
};

/// The id of the first holder in `fairsem status --json`'s output.
inline std::string holder_id(const Outcome& json_status) {
  const auto j = nlohmann::json::parse(json_status.out);
  return j.at("holders").at(0).at("id").get<std::string>();
}

}  // namespace fairsem::test
