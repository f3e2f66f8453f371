// The retry rule of a waiting acquire, with no server: which failures pass (a waiter retries
// them until its deadline) and the backoff between its retries.

#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <set>

#include "fairsem/errors.hpp"
#include "fairsem/impl/protocol/retry_backoff.hpp"

namespace fairsem::detail {
namespace {

using namespace std::chrono_literals;

template <class E, class... Args>
std::exception_ptr error(Args&&... args) {
  return std::make_exception_ptr(E(std::forward<Args>(args)...));
}

TEST(AcquireRetryTest, ConnectionClassErrorsAndServersInTransitPass) {
  EXPECT_TRUE(passes(error<ConnectionError>("cannot connect: Connection refused")));
  EXPECT_TRUE(passes(error<ConnectionError>("reconnecting gave up after 5 attempts")));
  EXPECT_TRUE(passes(error<TimeoutError>("no reply within 2000 ms")));
  for (const char* reply :
       {"LOADING Redis is loading the dataset in memory", "BUSY Redis is busy running a script",
        "MASTERDOWN Link with MASTER is down", "TRYAGAIN Multiple keys request during rehashing",
        "CLUSTERDOWN The cluster is down", "READONLY You can't write against a read only replica.",
        "UNBLOCKED force unblock from blocking operation",
        "ERR Error running script (call to f_1): @user_script:1: @user_script: 1: -READONLY "
        "You can't write against a read only replica."}) {
    EXPECT_TRUE(passes(error<ReplyError>("fairsem: acquire failed", reply))) << reply;
  }
}

TEST(AcquireRetryTest, EverythingElseEndsTheAcquire) {
  EXPECT_FALSE(passes(nullptr));
  EXPECT_FALSE(passes(error<AuthError>("WRONGPASS invalid username-password pair")));
  EXPECT_FALSE(passes(error<ReplyError>("x", "NOPERM this user has no permissions")));
  EXPECT_FALSE(passes(error<ReplyError>("x", "ERR Error running script: attempt to index nil")));
  EXPECT_FALSE(passes(error<ReplyError>("x", "OOM command not allowed")));
  EXPECT_FALSE(passes(error<ReplyError>("x", "WRONGTYPE Operation against a key")));
  EXPECT_FALSE(passes(error<ProtocolError>("unexpected reply")));
  EXPECT_FALSE(passes(error<InvalidArgument>("bad units")));
  EXPECT_FALSE(passes(error<EvictedError>("evicted", "id")));
  EXPECT_FALSE(passes(error<CancelledError>("cancelled")));
  EXPECT_FALSE(passes(std::make_exception_ptr(std::runtime_error("other"))));
}

TEST(AcquireRetryTest, TheBackoffDoublesWithJitterUpToItsCap) {
  RetryBackoff backoff(7);
  auto ceiling = RetryBackoff::kFirst;
  for (int i = 0; i < 12; ++i) {
    const auto pause = backoff.next();
    EXPECT_GE(pause, ceiling / 2) << i;
    EXPECT_LE(pause, ceiling) << i;
    ceiling = std::min(ceiling * 2, RetryBackoff::kCap);
  }
  EXPECT_EQ(backoff.failures(), 12);
  backoff.reset();
  EXPECT_LE(backoff.next(), RetryBackoff::kFirst);
}

TEST(AcquireRetryTest, TheJitterSpreadsWaitersCutOffAtOnce) {
  std::set<long long> pauses;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    RetryBackoff backoff(seed);
    for (int i = 0; i < 5; ++i) (void)backoff.next();
    pauses.insert(backoff.next().count());  // each in [400, 800] ms
  }
  EXPECT_GE(pauses.size(), 10u);
  EXPECT_EQ(RetryBackoff(5).next(), RetryBackoff(5).next());  // deterministic per seed
}

TEST(AcquireRetryTest, ABackoffNeverWaitsMoreThanItsCap) {
  RetryBackoff backoff(3, 10ms, 25ms);
  for (int i = 0; i < 100; ++i) EXPECT_LE(backoff.next(), 25ms);
}

}  // namespace
}  // namespace fairsem::detail
