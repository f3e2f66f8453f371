// The wake-up path's cost follows the semaphores waited on, not the waiters: a Client's waker
// listens with one BRPOP on its inbox of each semaphore it waits on (and its kick list), so
// 250 waiters on two semaphores make BRPOPs of at most three keys (read from the server's
// SLOWLOG, which logs every command with its arguments at a threshold of 0), send no kick after
// each semaphore's first waiter, and are every one of them served in call order.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "redis_server.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using detail::Connection;
using test::RedisServer;
using test::wait_until;

TEST(InboxTest, TheWakersBrpopNamesOneInboxPerSemaphoreHoweverManyWait) {
  RedisServer server;  // its own: the SLOWLOG settings below are the test's
  Connection admin(server.options());
  admin.command({"CONFIG", "SET", "slowlog-log-slower-than", "0"});
  admin.command({"CONFIG", "SET", "slowlog-max-len", "100000"});
  admin.command({"SLOWLOG", "RESET"});

  Client client(server.options());
  SemaphoreOptions o;
  o.limit = 1;
  o.key_prefix = test::unique_prefix();
  FairSemaphore a(client, "a", o);
  FairSemaphore b(client, "b", o);
  std::optional<Permit> holder_a = a.acquire();
  std::optional<Permit> holder_b = b.acquire();
  std::mutex mu;
  std::vector<long long> tokens_a;
  std::vector<long long> tokens_b;
  std::size_t failed = 0;
  const auto record = [&](std::vector<long long>& tokens) {
    return [&](std::exception_ptr error, std::optional<Permit> permit) {
      std::lock_guard<std::mutex> lock(mu);
      if (error || !permit) {
        ++failed;
        return;
      }
      tokens.push_back(permit->fencing_token());  // released as the callback returns
    };
  };
  constexpr std::size_t kA = 200;
  constexpr std::size_t kB = 50;
  for (std::size_t i = 0; i < std::max(kA, kB); ++i) {
    if (i < kA) a.acquire_async(record(tokens_a));
    if (i < kB) b.acquire_async(record(tokens_b));
  }
  ASSERT_TRUE(wait_until(
      [&] { return a.status().waiters.size() == kA && b.status().waiters.size() == kB; }));
  holder_a.reset();
  holder_b.reset();
  ASSERT_TRUE(wait_until([&] {
    std::lock_guard<std::mutex> lock(mu);
    return tokens_a.size() + tokens_b.size() + failed == kA + kB;
  }));
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(failed, 0U);
    EXPECT_TRUE(std::is_sorted(tokens_a.begin(), tokens_a.end()));
    EXPECT_TRUE(std::is_sorted(tokens_b.begin(), tokens_b.end()));
  }

  const detail::Reply log = admin.command({"SLOWLOG", "GET", "100000"});
  std::size_t brpops = 0;
  std::size_t most_keys = 0;
  std::size_t kicks = 0;
  for (const detail::Reply& entry : log.elements) {
    // {id, time, duration, {command, arguments...}, ...}
    ASSERT_GE(entry.elements.size(), 4U);
    const auto& argv = entry.elements[3].elements;
    if (argv.empty()) continue;
    std::string command = argv[0].str;
    std::transform(command.begin(), command.end(), command.begin(), ::toupper);
    if (command == "BRPOP") {
      ++brpops;
      most_keys = std::max(most_keys, argv.size() - 2);  // BRPOP key... timeout
    }
    for (const detail::Reply& arg : argv) {
      // kick.lua's call (the commands a script runs are logged too, under their own names).
      const bool script = command == "EVALSHA" || command == "FCALL" || command == "EVAL";
      if (script && arg.str.find(":wake:kick-") != std::string::npos) ++kicks;
    }
  }
  EXPECT_GT(brpops, 0U) << "the SLOWLOG saw no BRPOP";
  EXPECT_LE(most_keys, 3U) << "a BRPOP named more than the kick list and the two inboxes";
  EXPECT_LE(kicks, 2U) << "waiters after each semaphore's first kicked the waker";
  admin.command({"CONFIG", "SET", "slowlog-log-slower-than", "10000"});
}

}  // namespace
}  // namespace fairsem
