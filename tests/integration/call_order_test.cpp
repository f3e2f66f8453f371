// Call order is queue order: requests made one after another from one thread get tickets
// (fencing tokens) in that order, whatever mix of asynchronous (callback, future) and blocking
// calls (acquire, try_acquire_for, try_acquire) they are, through one handle or several handles
// of the semaphore in one Client; on a full semaphore they are granted in that order too, every
// one of them; and requests cancelled right after the calls leave nothing behind and stop nobody
// behind them.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using test::unique_options;
using test::wait_until;

/// The first index at which `tokens` fails to increase strictly (-1: none).
long long first_out_of_order(const std::vector<long long>& tokens) {
  for (std::size_t i = 1; i < tokens.size(); ++i) {
    if (tokens[i] <= tokens[i - 1]) return static_cast<long long>(i);
  }
  return -1;
}

TEST(CallOrderTest, AThousandAsynchronousCallsFromOneThreadAreGrantedInCallOrder) {
  Client client(test::redis_options());
  FairSemaphore sem(client, "thousand", unique_options(1));
  std::optional<Permit> holder = sem.acquire();
  constexpr std::size_t kCalls = 1000;
  std::mutex mu;
  std::vector<long long> tokens(kCalls, 0);
  std::vector<std::size_t> granted;  // call indices in the order of their grants
  std::size_t failed = 0;
  for (std::size_t i = 0; i < kCalls; ++i) {
    sem.acquire_async([&, i](std::exception_ptr error, std::optional<Permit> permit) {
      std::lock_guard<std::mutex> lock(mu);
      if (error || !permit) {
        ++failed;
        return;
      }
      tokens[i] = permit->fencing_token();
      granted.push_back(i);
      // The permit is released as the callback returns: the next waiter's turn.
    });
  }
  holder.reset();
  ASSERT_TRUE(wait_until(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return granted.size() + failed == kCalls;
      },
      120s));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(failed, 0U);
  EXPECT_EQ(first_out_of_order(tokens), -1) << "a call got a ticket before the one made before it";
  for (std::size_t i = 0; i < granted.size(); ++i) {
    ASSERT_EQ(granted[i], i) << "grant " << i << " went to another call";
  }
}

TEST(CallOrderTest, EveryMixOfCallsFromOneThreadGetsTicketsInCallOrder) {
  Client client(test::redis_options());
  const SemaphoreOptions o = unique_options(100000);
  // Two handles of one semaphore through one Client share the line.
  FairSemaphore first(client, "mix", o);
  FairSemaphore second(client, "mix", o);
  constexpr std::size_t kCalls = 600;
  std::vector<long long> tokens(kCalls, 0);
  std::vector<Permit> kept;  // held to the end: every call finds free units
  std::mutex mu;
  std::vector<std::future<Permit>> futures(kCalls);
  std::vector<std::future<std::optional<Permit>>> timed(kCalls);
  std::atomic<std::size_t> callbacks{0};
  const auto callback = [&](std::size_t i) {
    return [&, i](std::exception_ptr error, std::optional<Permit> permit) {
      std::lock_guard<std::mutex> lock(mu);
      if (!error && permit) {
        tokens[i] = permit->fencing_token();
        kept.push_back(std::move(*permit));
      }
      ++callbacks;
    };
  };
  std::size_t expected_callbacks = 0;
  for (std::size_t i = 0; i < kCalls; ++i) {
    FairSemaphore& sem = i % 2 == 0 ? first : second;
    std::optional<Permit> now;
    switch (i % 7) {
      case 0:
        sem.acquire_async(callback(i));
        ++expected_callbacks;
        break;
      case 1:
        futures[i] = sem.acquire_async();
        break;
      case 2:
        now = sem.acquire();
        break;
      case 3:
        sem.acquire_async_until(std::chrono::steady_clock::now() + 60s, callback(i));
        ++expected_callbacks;
        break;
      case 4:
        now = sem.try_acquire_for(60s);
        break;
      case 5:
        timed[i] = sem.try_acquire_for_async(60s);
        break;
      default:
        now = sem.try_acquire();
        break;
    }
    if (now) {
      std::lock_guard<std::mutex> lock(mu);
      tokens[i] = now->fencing_token();
      kept.push_back(std::move(*now));
    }
  }
  for (std::size_t i = 0; i < kCalls; ++i) {
    if (futures[i].valid()) tokens[i] = futures[i].get().fencing_token();
    if (timed[i].valid()) {
      std::optional<Permit> p = timed[i].get();
      ASSERT_TRUE(p) << "call " << i;
      tokens[i] = p->fencing_token();
    }
  }
  ASSERT_TRUE(wait_until([&] { return callbacks.load() == expected_callbacks; }));
  std::lock_guard<std::mutex> lock(mu);
  for (std::size_t i = 0; i < kCalls; ++i) ASSERT_NE(tokens[i], 0) << "call " << i << " failed";
  const long long at = first_out_of_order(tokens);
  EXPECT_EQ(at, -1) << "call " << at << " (kind " << at % 7 << ") got ticket " << tokens[at]
                    << ", not after " << tokens[at - 1];
}

TEST(CallOrderTest, RequestsCancelledRightAfterTheCallsLeaveNothingAndTheRestAreServedInOrder) {
  Client client(test::redis_options());
  FairSemaphore sem(client, "cancel-in-line", unique_options(1));
  std::optional<Permit> holder = sem.acquire();
  constexpr std::size_t kCalls = 200;
  std::mutex mu;
  std::vector<long long> tokens;  // of the calls kept, in grant order
  std::vector<std::size_t> kept_order;
  std::size_t cancelled = 0;
  std::size_t other = 0;
  std::vector<AcquireRequest> requests;
  for (std::size_t i = 0; i < kCalls; ++i) {
    requests.push_back(
        sem.acquire_async([&, i](std::exception_ptr error, std::optional<Permit> permit) {
          std::lock_guard<std::mutex> lock(mu);
          if (permit) {
            tokens.push_back(permit->fencing_token());
            kept_order.push_back(i);
          } else if (error) {
            try {
              std::rethrow_exception(error);
            } catch (const CancelledError&) {
              ++cancelled;
            } catch (...) {
              ++other;
            }
          }
        }));
  }
  std::size_t cancels = 0;
  for (std::size_t i = 1; i < kCalls; i += 2) cancels += requests[i].cancel() ? 1 : 0;
  EXPECT_EQ(cancels, kCalls / 2);  // none had completed: the semaphore is full
  holder.reset();
  ASSERT_TRUE(wait_until([&] {
    std::lock_guard<std::mutex> lock(mu);
    return tokens.size() + cancelled + other == kCalls;
  }));
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(other, 0U);
    EXPECT_EQ(cancelled, kCalls / 2);
    ASSERT_EQ(kept_order.size(), kCalls / 2);
    for (std::size_t k = 0; k < kept_order.size(); ++k) EXPECT_EQ(kept_order[k], 2 * k);
    EXPECT_EQ(first_out_of_order(tokens), -1);
  }
  // Nothing is left behind: no holder, no waiter. The last permit is released as its callback
  // returns, on the worker thread, after the count above is complete: waited for.
  Status s;
  EXPECT_TRUE(wait_until([&] {
    s = sem.status();
    return s.holders.empty() && s.waiters.empty();
  })) << s.holders.size()
      << " holders and " << s.waiters.size() << " waiters left";
}

}  // namespace
}  // namespace fairsem
