// Wake-up isolation on a Redis Cluster (issue 28, item 4): a Client waits for the wake-ups of
// each master's slots on one thread per master. One master hangs (SIGSTOP), and the thread
// that waits on its slots spends the hang reconnecting (each attempt's handshake waits out the
// command timeout). Waiters on the healthy masters must still get their wake-ups as they come,
// not at their next poll: the hung master's reconnects never hold up another master's BRPOPs.
// When the master comes back, its waiter is served too.

#include <gtest/gtest.h>

#include <fairsem/fairsem.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "redis_cluster.hpp"
#include "stopped.hpp"
#include "wait.hpp"

namespace {

using fairsem::Client;
using fairsem::ConnectionOptions;
using fairsem::FairSemaphore;
using fairsem::Permit;
using fairsem::SemaphoreOptions;
using fairsem::test::RedisCluster;
using fairsem::test::wait_until;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

class ClusterWakeTest : public ::testing::Test {
 protected:
  // No replicas: the hung master stays the master of its slots (no failover ends the hang).
  static void SetUpTestSuite() { cluster_ = std::make_unique<RedisCluster>(3, 0); }
  static void TearDownTestSuite() { cluster_.reset(); }

  /// A name (unique to this test) whose slot `master_port` serves.
  static std::string name_on(int master_port, const std::string& stem) {
    for (int i = 0;; ++i) {
      std::string name = stem + "-" + std::to_string(i);
      const int slot = RedisCluster::semaphore_slot(name);
      if (cluster_->master_port_for_slot(slot) == master_port) return name;
    }
  }

  static std::unique_ptr<RedisCluster> cluster_;
};

std::unique_ptr<RedisCluster> ClusterWakeTest::cluster_;

TEST_F(ClusterWakeTest, AHungMasterHoldsUpNoWakeUpOnTheHealthyOnes) {
  const std::vector<int> masters = cluster_->master_ports();
  ASSERT_EQ(masters.size(), 3U) << cluster_->logs();
  const int hung = masters[0];
  const int healthy = masters[1];

  ConnectionOptions options = ConnectionOptions::from_url(cluster_->seed_url());
  // Each connect to the hung master waits out the command timeout in its handshake (the
  // kernel still accepts the connection); ten attempts keep the thread of its slots busy for
  // 20 s and more, past the hand-offs below.
  options.client_name = "wake-isolation";
  options.reconnect_attempts = 10;
  Client client(options);
  SemaphoreOptions o;
  o.limit = 1;
  o.lease = seconds(90);  // waiters poll every 30 s: longer than any wait below
  FairSemaphore on_hung(client, name_on(hung, "hung"), o);
  FairSemaphore on_healthy(client, name_on(healthy, "healthy"), o);

  // A waiter on each master: each master's waker thread has a BRPOP under way.
  std::optional<Permit> hung_holder = on_hung.acquire();
  // A blocking waiter (its wake-ups through the same path), on a thread of the test's own.
  std::promise<std::optional<Permit>> hung_grant;
  std::future<std::optional<Permit>> hung_granted = hung_grant.get_future();
  std::thread hung_waiter([&] {
    try {
      hung_grant.set_value(on_hung.try_acquire_for(seconds(120)));
    } catch (...) {
      hung_grant.set_exception(std::current_exception());
    }
  });
  // However the test ends: the master answers (Stopped resumes it), the holder lets go, the
  // waiter's thread is joined.
  struct Joiner {
    std::thread& thread;
    std::optional<Permit>& holder;
    ~Joiner() {
      holder.reset();
      if (thread.joinable()) thread.join();
    }
  } joiner{hung_waiter, hung_holder};
  ASSERT_TRUE(wait_until([&] { return on_hung.status().waiters.size() == 1; }));
  Permit holder = on_healthy.acquire();
  std::future<Permit> next = on_healthy.acquire_async();
  ASSERT_TRUE(wait_until([&] { return on_healthy.status().waiters.size() == 1; }));

  int hand_offs = 0;
  {
    fairsem::test::Stopped stopped(cluster_->node(hung).pid());
    // The hung master's BRPOP is overdue after 1 s and the command timeout (3 s); its thread
    // reconnects from then on. Hand-offs on the healthy master go on meanwhile, each granted
    // by its wake-up (a poll would come 30 s late).
    const auto until = Clock::now() + seconds(10);
    while (Clock::now() < until) {
      holder.release();
      ASSERT_EQ(next.wait_for(seconds(5)), std::future_status::ready)
          << "hand-off " << hand_offs << " on a healthy master waited for the hung master";
      holder = next.get();
      ++hand_offs;
      next = on_healthy.acquire_async();
      ASSERT_TRUE(wait_until([&] { return on_healthy.status().waiters.size() == 1; }));
    }
  }  // SIGCONT

  // Every waiter is served once the master answers again.
  holder.release();
  ASSERT_EQ(next.wait_for(seconds(60)), std::future_status::ready);
  next.get().release();
  EXPECT_EQ(hung_holder->release(), fairsem::ReleaseResult::released);
  ASSERT_EQ(hung_granted.wait_for(seconds(60)), std::future_status::ready);
  std::optional<Permit> p = hung_granted.get();
  ASSERT_TRUE(p.has_value()) << "the waiter on the master that hung was never served";
  EXPECT_EQ(p->release(), fairsem::ReleaseResult::released);
  EXPECT_GT(hand_offs, 3) << "too few hand-offs to span the hung master's reconnects";
}

// Tenants on a cluster master: their keys share the semaphore's slot, and a waiter promoted
// ahead of an earlier ticket of another tenant is woken with its new ticket (a poll would come
// 30 s late): grants a1, b1, a2 in that order, fencing tokens rising.
TEST_F(ClusterWakeTest, TenantsAreServedByWeightAndWokenWithTheirNewTickets) {
  const std::vector<int> masters = cluster_->master_ports();
  ASSERT_EQ(masters.size(), 3U) << cluster_->logs();
  Client client(ConnectionOptions::from_url(cluster_->seed_url()));
  const std::string name = name_on(masters[2], "tenants");
  SemaphoreOptions o;
  o.limit = 1;
  o.lease = seconds(90);
  o.tenant = "a";
  FairSemaphore a(client, name, o);
  o.tenant = "b";
  FairSemaphore b(client, name, o);
  Permit held = a.acquire();
  std::future<Permit> a1 = a.acquire_async();
  std::future<Permit> a2 = a.acquire_async();
  ASSERT_TRUE(wait_until([&] { return a.status().waiters.size() == 2; }));
  std::future<Permit> b1 = b.acquire_async();
  ASSERT_TRUE(wait_until([&] { return a.status().waiters.size() == 3; }));
  long long token = held.fencing_token();
  for (std::future<Permit>* next : {&a1, &b1, &a2}) {
    held.release();
    ASSERT_EQ(next->wait_for(seconds(10)), std::future_status::ready)
        << "a grant waited for a poll";
    held = next->get();
    EXPECT_GT(held.fencing_token(), token);
    token = held.fencing_token();
  }
  EXPECT_EQ(held.release(), fairsem::ReleaseResult::released);
}

}  // namespace
