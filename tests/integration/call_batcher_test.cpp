// CallBatcher (ClientOptions::batch_calls) against a real redis-server: calls made while another
// is out go in one batch and each gets its own reply; a batch's code the server lacks is loaded
// and the calls run again; a call cancelled while queued is never sent; a socket that fails takes
// every call of its batch with it, as a lost reply. A script that loops until SCRIPT KILL holds
// the first call out while the others queue, so that the batch is made on purpose, not by chance.

#include <gtest/gtest.h>

#include <fairsem/impl/call_batcher.hpp>
#include <fairsem/impl/connection.hpp>

#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "redis_server.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using detail::Args;
using detail::CallBatcher;
using detail::Connection;
using detail::Reply;
using detail::Script;
using namespace std::chrono_literals;

constexpr int kQueued = 7;  // calls that queue behind the one held out

// A script the test server knows the SHA1 of (SCRIPT LOAD computes it).
struct TestScript {
  std::string body;
  std::string sha1;
  Script script() const { return Script{"test", body, sha1, nullptr, {}}; }
};

TestScript loaded(Connection& admin, std::string body) {
  TestScript s{std::move(body), {}};
  s.sha1 = admin.command({"SCRIPT", "LOAD", s.body}).str;
  return s;
}

// A server on which a script may run 100 ms before SCRIPT KILL can end it.
RedisServer killable_server() { return RedisServer({"--lua-time-limit", "100"}); }

// Holds the batcher's first call out: a script that loops until SCRIPT KILL.
struct HeldOut {
  TestScript loop;
  std::unique_ptr<Connection> conn;
  std::future<std::exception_ptr> ended;

  HeldOut(Connection& admin, CallBatcher& batcher, const ConnectionOptions& options)
      : loop(loaded(admin, "while true do end")), conn(std::make_unique<Connection>(options)) {
    ended = std::async(std::launch::async, [this, &batcher]() -> std::exception_ptr {
      const Script script = loop.script();
      try {
        batcher.eval(*conn, script, {}, {});
      } catch (...) {
        return std::current_exception();
      }
      return nullptr;
    });
    EXPECT_TRUE(test::wait_until([&] { return batcher.busy(); }));
  }
};

// kQueued callers, each on its own connection, calling `echo` with its own key and argument;
// each returns the reply's text, or what it threw ("connection error: ..." for a
// ConnectionError, TimeoutError included).
struct Callers {
  std::vector<std::unique_ptr<Connection>> conns;
  std::vector<std::atomic<bool>> cancel = std::vector<std::atomic<bool>>(kQueued);
  std::vector<std::future<std::string>> results;

  Callers(CallBatcher& batcher, const ConnectionOptions& options, const TestScript& echo,
          const std::string& prefix) {
    for (int i = 0; i < kQueued; ++i) {
      conns.push_back(std::make_unique<Connection>(options));
      conns.back()->set_interrupt(&cancel[i]);
    }
    for (int i = 0; i < kQueued; ++i) {
      results.push_back(std::async(std::launch::async, [&, i, prefix] {
        const Script script = echo.script();
        const std::string key = prefix + std::to_string(i);
        const std::string arg = "call " + std::to_string(i);
        try {
          return batcher.eval(*conns[i], script, Args{key}, Args{arg}).str;
        } catch (const ConnectionError& e) {
          return std::string("connection error: ") + e.what();
        } catch (const std::exception& e) {
          return std::string("threw: ") + e.what();
        }
      }));
    }
  }
};

// Counts its runs in KEYS[1] and answers ARGV[1].
const char* const kEcho = "redis.call('INCR', KEYS[1]) return ARGV[1]";

TEST(CallBatcherTest, CallsMadeWhileOneIsOutGoInOneBatchAndEachGetsItsOwnReply) {
  RedisServer server = killable_server();
  Connection admin(server.options());
  const TestScript echo = loaded(admin, kEcho);
  const std::string prefix = test::unique_prefix();
  CallBatcher batcher(64);
  HeldOut held(admin, batcher, server.options());
  Callers callers(batcher, server.options(), echo, prefix);
  ASSERT_TRUE(test::wait_until([&] { return batcher.queued() == kQueued; }));
  EXPECT_EQ(batcher.batches(), 0u) << "nothing may go while the first call is out";
  admin.command({"SCRIPT", "KILL"});
  const std::exception_ptr loop_error = held.ended.get();
  EXPECT_TRUE(loop_error) << "the looping script was killed, so its call failed";
  for (int i = 0; i < kQueued; ++i) {
    EXPECT_EQ(callers.results[i].get(), "call " + std::to_string(i));
    EXPECT_EQ(admin.command({"GET", prefix + std::to_string(i)}).str, "1") << "ran once";
  }
  EXPECT_EQ(batcher.batches(), 1u);
  EXPECT_EQ(batcher.batched_calls(), static_cast<std::uint64_t>(kQueued));
}

TEST(CallBatcherTest, CodeTheServerLacksIsLoadedAndTheBatchsCallsRunAgain) {
  RedisServer server = killable_server();
  Connection admin(server.options());
  const TestScript echo = loaded(admin, kEcho);
  // The server forgets it: every call of the batch meets NOSCRIPT.
  admin.command({"SCRIPT", "FLUSH"});
  const std::string prefix = test::unique_prefix();
  CallBatcher batcher(64);
  HeldOut held(admin, batcher, server.options());
  Callers callers(batcher, server.options(), echo, prefix);
  ASSERT_TRUE(test::wait_until([&] { return batcher.queued() == kQueued; }));
  admin.command({"SCRIPT", "KILL"});
  held.ended.get();
  for (int i = 0; i < kQueued; ++i) {
    EXPECT_EQ(callers.results[i].get(), "call " + std::to_string(i));
    EXPECT_EQ(admin.command({"GET", prefix + std::to_string(i)}).str, "1") << "ran once";
  }
  EXPECT_EQ(batcher.batched_calls(), static_cast<std::uint64_t>(kQueued)) << "went in a batch";
}

TEST(CallBatcherTest, ACallCancelledWhileQueuedIsNeverSentAndTheOthersAreServed) {
  RedisServer server = killable_server();
  Connection admin(server.options());
  const TestScript echo = loaded(admin, kEcho);
  const std::string prefix = test::unique_prefix();
  CallBatcher batcher(64);
  HeldOut held(admin, batcher, server.options());
  Callers callers(batcher, server.options(), echo, prefix);
  ASSERT_TRUE(test::wait_until([&] { return batcher.queued() == kQueued; }));
  constexpr int kCancelled = 3;
  callers.cancel[kCancelled] = true;
  // It leaves the queue at once, while the first call is still out.
  const std::string cancelled = callers.results[kCancelled].get();
  EXPECT_EQ(cancelled.rfind("connection error: ", 0), 0u) << cancelled;
  EXPECT_NE(cancelled.find("cancelled"), std::string::npos) << cancelled;
  EXPECT_EQ(batcher.queued(), static_cast<std::size_t>(kQueued - 1));
  admin.command({"SCRIPT", "KILL"});
  held.ended.get();
  for (int i = 0; i < kQueued; ++i) {
    if (i == kCancelled) continue;
    EXPECT_EQ(callers.results[i].get(), "call " + std::to_string(i));
  }
  EXPECT_EQ(admin.command({"EXISTS", prefix + std::to_string(kCancelled)}).integer, 0)
      << "the cancelled call ran";
  EXPECT_EQ(batcher.batched_calls(), static_cast<std::uint64_t>(kQueued - 1));
}

TEST(CallBatcherTest, WhenTheServerGoesEveryCallOfTheBatchGetsAConnectionError) {
  RedisServer server = killable_server();
  ConnectionOptions options = server.options();
  options.reconnect_attempts = 1;
  Connection admin(options);
  const TestScript echo = loaded(admin, kEcho);
  CallBatcher batcher(64);
  HeldOut held(admin, batcher, options);
  Callers callers(batcher, options, echo, test::unique_prefix());
  ASSERT_TRUE(test::wait_until([&] { return batcher.queued() == kQueued; }));
  server.kill();
  const std::exception_ptr loop_error = held.ended.get();
  EXPECT_THROW(std::rethrow_exception(loop_error), ConnectionError);
  for (int i = 0; i < kQueued; ++i) {
    const std::string result = callers.results[i].get();
    EXPECT_EQ(result.rfind("connection error: ", 0), 0u) << result;
  }
  EXPECT_EQ(batcher.queued(), 0u);
  EXPECT_FALSE(batcher.busy());
}

}  // namespace
}  // namespace fairsem
