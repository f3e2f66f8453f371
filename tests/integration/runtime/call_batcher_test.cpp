// CallBatcher (ClientOptions::batch_calls) against a real redis-server: calls made while another
// is out go in one batch and each gets its own reply; a batch's code the server lacks is loaded
// and the calls run again; a call cancelled while queued is never sent; a socket that fails takes
// every call of its batch with it, as a lost reply. A script that loops until SCRIPT KILL holds
// the first call out while the others queue, so that the batch is made on purpose, not by chance.

#include <gtest/gtest.h>

#include <fairsem/impl/net/connection.hpp>
#include <fairsem/impl/runtime/call_batcher.hpp>

#include <atomic>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "call_batcher_peer.hpp"
#include "redis_server.hpp"
#include "test_env.hpp"
#include "wait.hpp"

using fairsem::detail::CallBatcherPeer;

namespace fairsem {
namespace {

using detail::Args;
using detail::CallBatcher;
using detail::Connection;
using detail::Reply;
using detail::Script;
using test::RedisServer;
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
    EXPECT_TRUE(test::wait_until([&] { return CallBatcherPeer::busy(batcher); }));
  }
};

// kQueued callers, each on its own connection, calling `echo` with its own key and argument;
// each returns the reply's text, or what it threw ("connection error: ..." for a
// ConnectionError, TimeoutError included).
struct Callers {
  std::vector<std::unique_ptr<Connection>> conns;
  std::vector<std::atomic<bool>> cancel = std::vector<std::atomic<bool>>(kQueued);
  std::vector<std::future<std::string>> results;
  std::vector<char> batched = std::vector<char>(kQueued, 0);  // as eval() said; one per caller

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
          bool went_batched = false;
          std::string reply =
              batcher.eval(*conns[i], script, Args{key}, Args{arg}, &went_batched).str;
          batched[static_cast<std::size_t>(i)] = went_batched ? 1 : 0;
          return reply;
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

class CallBatcherTest : public ::testing::Test {
 protected:
  // Holds the batcher's first call out and queues kQueued callers of the echo script behind it
  // (the server forgets that script first when `forget_echo`).
  void queue_behind_a_held_call(bool forget_echo = false) {
    echo_.emplace(loaded(admin_, kEcho));
    if (forget_echo) admin_.command({"SCRIPT", "FLUSH"});
    held_ = std::make_unique<HeldOut>(admin_, batcher_, options_);
    callers_ = std::make_unique<Callers>(batcher_, options_, *echo_, prefix_);
    ASSERT_TRUE(test::wait_until([&] { return CallBatcherPeer::queued(batcher_) == kQueued; }));
  }
  // Ends the held call (SCRIPT KILL) and returns what it threw.
  std::exception_ptr end_the_held_call() {
    admin_.command({"SCRIPT", "KILL"});
    return held_->ended.get();
  }
  // Each caller but `skipped` got its own reply, and ran once.
  void expect_each_served(int skipped = -1) {
    for (int i = 0; i < kQueued; ++i) {
      if (i == skipped) continue;
      EXPECT_EQ(callers_->results[i].get(), "call " + std::to_string(i));
      EXPECT_EQ(admin_.command({"GET", prefix_ + std::to_string(i)}).str, "1") << "ran once";
    }
  }

  // A script may run 100 ms before SCRIPT KILL can end it.
  RedisServer server_{{"--lua-time-limit", "100"}};
  ConnectionOptions options_ = server_.options();
  Connection admin_{options_};
  const std::string prefix_ = test::unique_prefix();
  CallBatcher batcher_{64};
  std::optional<TestScript> echo_;
  std::unique_ptr<HeldOut> held_;
  std::unique_ptr<Callers> callers_;
};

TEST_F(CallBatcherTest, CallsMadeWhileOneIsOutGoInOneBatchAndEachGetsItsOwnReply) {
  queue_behind_a_held_call();
  EXPECT_EQ(CallBatcherPeer::batches(batcher_), 0u) << "nothing may go while the first call is out";
  EXPECT_TRUE(end_the_held_call()) << "the looping script was killed, so its call failed";
  expect_each_served();
  EXPECT_EQ(CallBatcherPeer::batches(batcher_), 1u);
  EXPECT_EQ(batcher_.batched_calls(), static_cast<std::uint64_t>(kQueued));
  for (int i = 0; i < kQueued; ++i) {
    EXPECT_TRUE(callers_->batched[static_cast<std::size_t>(i)]) << "call " << i << " says alone";
  }
}

TEST_F(CallBatcherTest, CodeTheServerLacksIsLoadedAndTheBatchsCallsRunAgain) {
  queue_behind_a_held_call(/*forget_echo=*/true);  // every call of the batch meets NOSCRIPT
  end_the_held_call();
  expect_each_served();
  EXPECT_EQ(batcher_.batched_calls(), static_cast<std::uint64_t>(kQueued)) << "went in a batch";
}

TEST_F(CallBatcherTest, ACallCancelledWhileQueuedIsNeverSentAndTheOthersAreServed) {
  queue_behind_a_held_call();
  constexpr int kCancelled = 3;
  callers_->cancel[kCancelled] = true;
  // It leaves the queue at once, while the first call is still out.
  const std::string cancelled = callers_->results[kCancelled].get();
  EXPECT_EQ(cancelled.rfind("connection error: ", 0), 0u) << cancelled;
  EXPECT_NE(cancelled.find("cancelled"), std::string::npos) << cancelled;
  EXPECT_EQ(CallBatcherPeer::queued(batcher_), static_cast<std::size_t>(kQueued - 1));
  end_the_held_call();
  expect_each_served(kCancelled);
  EXPECT_EQ(admin_.command({"EXISTS", prefix_ + std::to_string(kCancelled)}).integer, 0)
      << "the cancelled call ran";
  EXPECT_EQ(batcher_.batched_calls(), static_cast<std::uint64_t>(kQueued - 1));
}

TEST_F(CallBatcherTest, WhenTheServerGoesEveryCallOfTheBatchGetsAConnectionError) {
  options_.reconnect_attempts = 1;
  queue_behind_a_held_call();
  server_.kill();
  EXPECT_THROW(std::rethrow_exception(held_->ended.get()), ConnectionError);
  for (int i = 0; i < kQueued; ++i) {
    const std::string result = callers_->results[i].get();
    EXPECT_EQ(result.rfind("connection error: ", 0), 0u) << result;
  }
  EXPECT_EQ(CallBatcherPeer::queued(batcher_), 0u);
  EXPECT_FALSE(CallBatcherPeer::busy(batcher_));
}

}  // namespace
}  // namespace fairsem
