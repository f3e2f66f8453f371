#pragma once

// Waiters queued behind one holder, blocking and asynchronous, for the tests of outages
// (restarts, LOADING, failovers): who was granted, in which order, with which token.

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "wait.hpp"

namespace fairsem::test {

/// what() of the exception in `error` ("unknown" for one that is not a std::exception).
inline std::string what_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown";
  }
}

/// Blocking and asynchronous waiters queued behind one holder, in a known order; each one
/// granted records its place and token, then releases at once. A test that ends early lets
/// them all through: the holder's permit is dropped before they are joined.
class QueuedWaiters {
 public:
  QueuedWaiters(FairSemaphore& sem, std::optional<Permit>& holder, std::size_t blocking,
                std::size_t futures)
      : sem_(sem), holder_(holder) {
    const std::size_t before = sem_.status().waiters.size();
    for (std::size_t i = 0; i < blocking; ++i) {
      threads_.emplace_back([this, i] {
        try {
          Permit permit = sem_.acquire();
          record(i, permit);
        } catch (...) {
          fail(i, std::current_exception());
        }
      });
      // One at a time, so that the queue order is the order of the indexes.
      EXPECT_TRUE(wait_until([&] { return sem_.status().waiters.size() == before + i + 1; }));
    }
    for (std::size_t i = blocking; i < blocking + futures; ++i) {
      auto future = std::make_shared<std::future<Permit>>(sem_.acquire_async());
      EXPECT_TRUE(wait_until([&] { return sem_.status().waiters.size() == before + i + 1; }));
      threads_.emplace_back([this, i, future] {
        try {
          Permit permit = future->get();
          record(i, permit);
        } catch (...) {
          fail(i, std::current_exception());
        }
      });
    }
  }

  ~QueuedWaiters() { join(); }
  QueuedWaiters(const QueuedWaiters&) = delete;
  QueuedWaiters& operator=(const QueuedWaiters&) = delete;

  void join() {
    holder_.reset();
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

  /// Waits (bounded) until every waiter was granted or failed.
  bool all_done(std::chrono::seconds bound) {
    return wait_until(
        [&] {
          std::lock_guard<std::mutex> lock(mu_);
          return granted_.size() + failures_.size() == threads_.size();
        },
        bound);
  }

  /// Checks that all were granted, one after the other in the order they queued (`in_queue_order`)
  /// and, in any case, in the order of their tokens (tickets).
  void expect_all_granted_in_order(bool in_queue_order) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& failure : failures_) ADD_FAILURE() << failure;
    EXPECT_EQ(granted_.size(), threads_.size()) << failures_.size() << " waiters failed";
    for (std::size_t k = 1; k < granted_.size(); ++k) {
      EXPECT_LT(granted_[k - 1].token, granted_[k].token)
          << "grant " << k << " (waiter " << granted_[k].index << ") has an older ticket than the "
          << "one before it (waiter " << granted_[k - 1].index << ")";
      if (in_queue_order) {
        EXPECT_LT(granted_[k - 1].index, granted_[k].index) << "granted out of queue order";
      }
    }
  }

 private:
  struct Grant {
    std::size_t index;
    long long token;
  };

  void record(std::size_t index, Permit& permit) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      granted_.push_back({index, permit.fencing_token()});
    }
    // Released after it was recorded: with limit 1, the next grant is recorded after this one.
    (void)permit.release();
  }

  void fail(std::size_t index, const std::exception_ptr& error) {
    std::lock_guard<std::mutex> lock(mu_);
    failures_.push_back("waiter " + std::to_string(index) + " failed: " + what_of(error));
  }

  FairSemaphore& sem_;
  std::optional<Permit>& holder_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::vector<Grant> granted_;
  std::vector<std::string> failures_;
};

/// The keys matching `pattern` that a finished run may not leave: anything but a semaphore's
/// counter, stored limit, free slots and release receipts, and a Client's wake inbox that
/// expires on its own (a wake-up its waker never popped: the waiter was served by a poll while
/// the waker reconnected, say; the list expires one lease after its last push).
inline std::vector<std::string> leftover_keys(detail::Connection conn, const std::string& pattern) {
  const auto ends_with = [](const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  const detail::Reply keys = conn.command({"KEYS", pattern});
  std::vector<std::string> left;
  for (const detail::Reply& key : keys.elements) {
    const std::string& k = key.str;
    const bool allowed =
        ends_with(k, ":counter") || ends_with(k, ":meta") || ends_with(k, ":free") ||
        k.find(":receipts:") != std::string::npos ||
        (k.find(":wake:{inbox}") != std::string::npos && conn.command({"PTTL", k}).integer > 0);
    if (!allowed) left.push_back(k);
  }
  return left;
}

/// Both sets empty: no holder, no waiter, as a fresh status() reads them (false on an error).
inline bool queue_empty(FairSemaphore& sem) {
  try {
    const Status s = sem.status();
    return s.holders.empty() && s.waiters.empty();
  } catch (const Error&) {
    return false;
  }
}

}  // namespace fairsem::test
