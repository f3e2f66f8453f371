// The uncontended pair runs inline (src/lua/semaphore/acquire.lua and release.lua): an acquire
// of a fresh id on a semaphore nobody holds or waits on, and the release of the last holder
// out, which reads its entry before prepare() when prepare() has nothing to do. Each must do
// exactly what the general path does in that case, refusals and their undoing included.
//
// Each case sets up two semaphores alike and runs the operation on both: an acquire with FRESH 1
// (the inline path, where it applies) and FRESH 0 (the general path, which a fresh id takes the
// same way but for a DEL of a wake list it does not have); a release with the stored limit and
// with another one (which the general path follows, after prepare()). The replies and every key
// afterwards must match, but for the names and the server's clock in them.

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "fairsem/impl/net/connection.hpp"
#include "redis_server.hpp"
#include "semaphore_fixture.hpp"
#include "test_env.hpp"

namespace fairsem {
namespace {

using detail::Args;
using detail::Connection;
using detail::Reply;
using test::redis_options;

const auto nothing = [](const auto&) {};

class HotPathTest : public test::SemaphoreFixture {
 protected:
  struct Case {
    std::string name;
    /// Changes the opened semaphore's keys (`key(suffix)` names one) before the acquire.
    std::function<void(const std::function<std::string(const std::string&)>& key)> setup;
    /// The acquire's arguments after the operation's name, limit and lease, but FRESH.
    std::vector<std::string> args{"id-1", "try", "host 1", "0", "1", "", "0", "0"};
    std::string limit = "2";
  };

  /// A reply or a key's content as text, with the server's times (13 digits or more) as T.
  static std::string text(const Reply& r) {
    std::string out = r.type == Reply::Type::error ? "error:" + r.str : r.str;
    if (r.type == Reply::Type::integer) out = std::to_string(r.integer);
    for (const Reply& e : r.elements) out += "[" + text(e) + "]";
    return std::regex_replace(out, std::regex("[0-9]{13,}"), "T");
  }

  /// `s` with every `name` in it as S.
  static std::string renamed(std::string s, const std::string& name) {
    for (auto at = s.find(name); at != std::string::npos; at = s.find(name)) {
      s.replace(at, name.size(), "S");
    }
    return s;
  }

  /// The keys of semaphore `name` (renamed to {S}) with their types and contents, times as T.
  std::map<std::string, std::string> keys_of(const std::string& name) {
    std::map<std::string, std::string> out;
    const std::string tag = "{" + name + "}";
    for (const auto& [k, content] : snapshot()) {
      const auto at = k.find(tag);
      if (at == std::string::npos) continue;
      std::string renamed = k;
      renamed.replace(at, tag.size(), "{S}");
      out[std::regex_replace(renamed, std::regex("[0-9]{13,}"), "T")] =
          std::regex_replace(content, std::regex("[0-9]{13,}"), "T");
    }
    return out;
  }

  /// Opens semaphore `name` (limit 2), runs `c.setup` on it, then the acquire with `fresh`.
  Reply acquire(const Case& c, const std::string& name, const std::string& fresh) {
    run_op(conn_, name, {"open"}, "2", "60000");
    c.setup([&](const std::string& suffix) { return key(name, suffix); });
    Args args{"acquire"};
    for (const std::string& a : c.args) args.emplace_back(a);
    args.emplace_back(fresh);
    try {
      return run_op(conn_, name, args, c.limit, "60000");
    } catch (const std::exception& e) {
      Reply error;
      error.type = Reply::Type::error;
      error.str = e.what();
      return error;
    }
  }

  /// Runs case `c` both ways; expects the same reply and the same keys; returns the reply.
  std::string acquire_both_ways(const Case& c) {
    const std::string inline_name = "inline-" + c.name, general_name = "general-" + c.name;
    const std::string inline_reply = text(acquire(c, inline_name, "1"));
    const std::string general_reply = text(acquire(c, general_name, "0"));
    EXPECT_EQ(renamed(inline_reply, inline_name), renamed(general_reply, general_name)) << c.name;
    EXPECT_EQ(keys_of(inline_name), keys_of(general_name)) << c.name;
    return renamed(inline_reply, inline_name);
  }

  /// Opens `name` (limit 2), acquires `holders` permits of 1 unit (ids h0, h1, ...; tickets
  /// 1001, 1002, ..., from a counter set first), runs `setup`, then releases h0 with ticket
  /// `ticket`, passing limit `limit`.
  std::string release(const std::string& name, int holders, const std::string& ticket,
                      const std::string& limit,
                      const std::function<void(const std::string&)>& setup) {
    run_op(conn_, name, {"open"}, "2", "60000");
    admin_.command({"SET", key(name, "counter"), "1000"});
    for (int i = 0; i < holders; ++i) {
      run_op(conn_, name,
             {"acquire", "h" + std::to_string(i), "try", "host 1", "0", "1", "", "0", "0", "1"},
             "2", "60000");
    }
    setup(name);
    try {
      return text(run_op(conn_, name, {"release", "h0", ticket, "60000"}, limit, "60000"));
    } catch (const std::exception& e) {
      return std::string("error:") + e.what();
    }
  }
  /// Runs both ways; expects the same reply and keys; returns the reply.
  std::string release_both_ways(const std::string& name, int holders, const std::string& ticket,
                                const std::function<void(const std::string&)>& setup = nothing) {
    const std::string ready = "ready-" + name, other = "other-" + name;
    const std::string ready_reply = renamed(release(ready, holders, ticket, "2", setup), ready);
    const std::string other_reply = renamed(release(other, holders, ticket, "3", setup), other);
    EXPECT_EQ(ready_reply, other_reply) << name;
    EXPECT_EQ(keys_of(ready), keys_of(other)) << name;
    return ready_reply;
  }

  Connection conn_{redis_options()};
};

TEST_F(HotPathTest, AGrantIsTheGeneralPathsGrant) {
  // A new counter starts at the server's clock times 1024: a time, T.
  EXPECT_EQ(acquire_both_ways({"one", nothing}), "[1][T][T][0][T][0]");
  Case two{"two", nothing};
  two.args[4] = "2";
  EXPECT_EQ(acquire_both_ways(two), "[1][T][T][0][T][0][1]");
  Case queue{"queue", nothing};
  queue.args[1] = "queue";
  EXPECT_EQ(acquire_both_ways(queue), "[1][T][T][0][T][0]");
  // The counter goes on from where it is.
  EXPECT_EQ(acquire_both_ways({"counter",
                               [this](const auto& key) {
                                 admin_.command({"SET", key("counter"), "41"});
                               }}),
            "[1][42][T][0][T][0]");
}

TEST_F(HotPathTest, ARefusalUndoesWhatTheGeneralPathUndoes) {
  for (const std::string suffix : {"owner", "time", "info", "slots"}) {
    const std::string reply =
        acquire_both_ways({"foreign-" + suffix, [this, suffix](const auto& key) {
                             admin_.command({"SET", key(suffix), "not fairsem's"});
                           }});
    EXPECT_NE(reply.find("[-2]"), std::string::npos) << suffix << ": " << reply;
  }
  // The counter is the last key written to: everything before it is undone.
  EXPECT_EQ(acquire_both_ways({"counter-hash",
                               [this](const auto& key) {
                                 admin_.command({"HSET", key("counter"), "field", "value"});
                               }})
                .substr(0, 4),
            "[-2]");
  EXPECT_EQ(acquire_both_ways({"counter-text",
                               [this](const auto& key) {
                                 admin_.command({"SET", key("counter"), "twelve"});
                               }})
                .substr(0, 4),
            "[-3]");
}

TEST_F(HotPathTest, ACounterSetBackStartsAgainFromTheClock) {
  EXPECT_EQ(acquire_both_ways({"counter-negative",
                               [this](const auto& key) {
                                 admin_.command({"SET", key("counter"), "-7"});
                               }}),
            "[1][T][T][0][T][0]");
}

TEST_F(HotPathTest, EveryOtherCaseIsTheGeneralPathsToo) {
  Case too_many{"too-many", nothing};
  too_many.args[4] = "3";
  EXPECT_EQ(acquire_both_ways(too_many), "[-4][2]");
  Case other_limit{"other-limit", nothing};
  other_limit.limit = "3";  // the stored limit, 2, is followed
  other_limit.args[4] = "2";
  EXPECT_EQ(acquire_both_ways(other_limit), "[1][T][T][0][T][0][1]");
  Case idle_expiry{"idle-expiry", nothing};
  idle_expiry.args[7] = "60000";
  acquire_both_ways(idle_expiry);
  acquire_both_ways({"stored-expiry", [this](const auto& key) {
                       admin_.command({"HSET", key("meta"), "expiry", "60000"});
                     }});
  EXPECT_EQ(
      acquire_both_ways({"model-3",
                         [this](const auto& key) {
                           admin_.command({"HSET", key("meta"), "model", "4", "model_by", "9.9.9"});
                         }}),
      "[-7][4][3][9.9.9]");
  acquire_both_ways({"model-2", [this](const auto& key) {
                       admin_.command({"HSET", key("meta"), "model", "2", "model_by", "0.3.1"});
                     }});
  acquire_both_ways({"no-slots-yet", [this](const auto& key) {
                       admin_.command({"HDEL", key("meta"), "slots"});
                     }});
  // Somebody waits though nobody holds (edited behind the semaphore's back).
  acquire_both_ways({"waiter", [this](const auto& key) {
                       admin_.command({"ZADD", key("owner"), "5", "ghost"});
                       admin_.command({"ZADD", key("time"), "99999999999999", "ghost"});
                       admin_.command({"HSET", key("info"), "ghost", "host 2"});
                     }});
  // Somebody holds.
  acquire_both_ways({"holder", [this](const auto& key) {
                       admin_.command({"ZADD", key("owner"), "5", "holder"});
                       admin_.command({"ZADD", key("time"), "99999999999999", "holder"});
                       admin_.command({"HSET", key("info"), "holder", "host 2"});
                       admin_.command({"HSET", key("slots"), "holder", "0"});
                       admin_.command({"HSET", key("meta"), "slots", "1"});
                     }});
}

TEST_F(HotPathTest, TheLastHolderOutLeavesAsTheGeneralPathLetsIt) {
  EXPECT_EQ(release_both_ways("last", 1, "1001"), "[1]");
  EXPECT_EQ(release_both_ways("not-last", 2, "1001"), "[1]");
  EXPECT_EQ(release_both_ways("other-ticket", 1, "7"), "[0]");
  // A release run again after its reply was lost finds its receipt.
  EXPECT_EQ(
      release_both_ways("again", 1, "1001",
                        [this](const std::string& name) {
                          run_op(conn_, name, {"release", "h0", "1001", "60000"}, "2", "60000");
                        }),
      "[3]");
  EXPECT_EQ(release_both_ways(
                "model-3", 1, "1001",
                [this](const std::string& name) {
                  admin_.command({"HSET", key(name, "meta"), "model", "4", "model_by", "9.9.9"});
                }),
            "[-7][4][3][9.9.9]");
  for (const std::string suffix : {"owner", "time", "info", "slots"}) {
    const std::string reply =
        release_both_ways("foreign-" + suffix, 1, "1001", [this, suffix](const std::string& name) {
          admin_.command({"DEL", key(name, suffix)});
          admin_.command({"SET", key(name, suffix), "x"});
        });
    EXPECT_EQ(reply.substr(0, 4), "[-2]") << suffix << ": " << reply;
  }
}

// What the inline paths are for: an uncontended pair makes the 20 calls it needs (the reads,
// the writes, the clock and the receipt) and no more: no counts of the slot keys, no look for
// an earlier entry or for waiters. On a server of its own: INFO commandstats counts every
// client's commands.
TEST_F(HotPathTest, AnUncontendedPairMakesTwentyCalls) {
  test::RedisServer server;
  Connection conn(server.options());
  Connection admin(server.options());
  // A first pair loads the scripts (on Redis 6.2, a SCRIPT LOAD each) and opens the semaphore.
  const Reply warm =
      run_op(conn, "pair", {"acquire", "warm", "try", "host 1", "0", "1", "", "0", "0", "1"}, "2",
             "60000");
  ASSERT_EQ(warm.elements.at(0).integer, 1);
  run_op(conn, "pair", {"release", "warm", std::to_string(warm.elements.at(1).integer), "60000"},
         "2", "60000");
  admin.command({"CONFIG", "RESETSTAT"});
  const Reply granted =
      run_op(conn, "pair", {"acquire", "id-1", "try", "host 1", "0", "1", "", "0", "0", "1"}, "2",
             "60000");
  ASSERT_EQ(granted.elements.at(0).integer, 1);
  const std::string ticket = std::to_string(granted.elements.at(1).integer);
  ASSERT_EQ(run_op(conn, "pair", {"release", "id-1", ticket, "60000"}, "2", "60000")
                .elements.at(0)
                .integer,
            1);
  const std::string stats = admin.command({"INFO", "commandstats"}).str;
  std::map<std::string, long long> calls;
  for (std::size_t at = stats.find("cmdstat_"); at != std::string::npos;
       at = stats.find("cmdstat_", at + 1)) {
    const std::size_t colon = stats.find(":calls=", at);
    const std::string command = stats.substr(at + 8, colon - at - 8);
    // The pair's two script calls (FCALL, or EVALSHA on Redis 6.2) and this test's own.
    if (command == "info" || command.rfind("config", 0) == 0 || command == "fcall" ||
        command.rfind("eval", 0) == 0) {
      continue;
    }
    calls[command] = std::stoll(stats.substr(colon + 7));
  }
  const std::map<std::string, long long> expected{
      {"hmget", 2},  {"zcard", 2}, {"time", 2}, {"hset", 5},      {"zadd", 2}, {"incr", 1},
      {"zscore", 2}, {"hget", 1},  {"hdel", 1}, {"pexpireat", 1}, {"del", 1}};
  EXPECT_EQ(calls, expected);
}

}  // namespace
}  // namespace fairsem
