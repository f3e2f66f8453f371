// Fair shares between tenants on one semaphore (SemaphoreOptions::tenant, src/lua/semaphore/
// tenants.lua) against a real redis-server: weighted fair queuing by units across tenants,
// strict FIFO within each, a lone tenant gets the whole limit, a newcomer is not stuck behind
// another tenant's backlog, fencing tokens still rise in grant order, weights are checked
// before anything is sent, and status() adds up each tenant.

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "semaphore_fixture.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using test::redis_options;
using test::wait_until;

/// Grants as they come: which tenant's request (and its index among that tenant's), in order.
struct Grants {
  struct Grant {
    std::string tenant;
    int index = 0;
    Permit permit;
  };
  std::mutex m;
  std::vector<Grant> order;

  std::size_t size() {
    std::lock_guard<std::mutex> lock(m);
    return order.size();
  }
  AcquireCallback record(const std::string& tenant, int index) {
    return [this, tenant, index](std::exception_ptr error, std::optional<Permit> permit) {
      if (error || !permit) return;
      std::lock_guard<std::mutex> lock(m);
      order.push_back({tenant, index, std::move(*permit)});
    };
  }
  /// Releases grant `i` once it has come; false if it did not.
  bool release(std::size_t i) {
    if (!wait_until([&] { return size() > i; })) return false;
    std::lock_guard<std::mutex> lock(m);
    order[i].permit.release();
    return true;
  }
};

class TenantTest : public test::SemaphoreFixture {
 protected:
  SemaphoreOptions of(long long limit, const std::string& tenant) {
    SemaphoreOptions o = options(limit);
    o.tenant = tenant;
    return o;
  }
};

// Limit 1, weights a:1 b:2 c:1, each with 12 requests queued: every 4 grants in a row give a
// one, b two and c one, and each tenant's requests go in the order they were made.
TEST_F(TenantTest, WeightsShareGrantsInProportionAndEachTenantStaysFifo) {
  // First: the callbacks of requests still pending write here until the semaphores are gone.
  Grants grants;
  Client client(redis_options());
  SemaphoreAdmin admin(client, "shares", prefix_);
  EXPECT_EQ(1, admin.set_tenant_weight("b", 2));
  std::map<std::string, std::unique_ptr<FairSemaphore>> handles;
  for (const char* t : {"a", "b", "c"}) {
    handles[t] = std::make_unique<FairSemaphore>(client, "shares", of(1, t));
  }
  Permit first = handles["a"]->acquire();
  std::vector<AcquireRequest> requests;
  for (int i = 0; i < 12; ++i) {
    for (const char* t : {"a", "b", "c"}) {
      requests.push_back(handles[t]->acquire_async(1, grants.record(t, i)));
    }
  }
  ASSERT_TRUE(wait_until([&] { return admin.status().waiters.size() == 36; }));
  long long last_token = first.fencing_token();
  first.release();
  std::map<std::string, int> count, next;
  for (std::size_t i = 0; i < 24; ++i) {
    ASSERT_TRUE(wait_until([&] { return grants.size() > i; })) << "grant " << i;
    {
      std::lock_guard<std::mutex> lock(grants.m);
      const Grants::Grant& g = grants.order[i];
      EXPECT_EQ(next[g.tenant]++, g.index) << "FIFO within " << g.tenant;
      EXPECT_GT(g.permit.fencing_token(), last_token) << "tokens rise in grant order";
      last_token = g.permit.fencing_token();
      ++count[g.tenant];
    }
    if (i % 4 == 3) {
      EXPECT_EQ(count["a"] * 2, count["b"]) << "after " << i + 1 << " grants";
      EXPECT_EQ(count["a"], count["c"]) << "after " << i + 1 << " grants";
    }
    ASSERT_TRUE(grants.release(i));
  }
  EXPECT_EQ(6, count["a"]);
  EXPECT_EQ(12, count["b"]);
  EXPECT_EQ(6, count["c"]);
}

// One tenant with 1,000 requests queued; another tenant's single request is granted within the
// next 2 grants (the first queue's order stays FIFO).
TEST_F(TenantTest, ANewTenantIsNotQueuedBehindAnotherTenantsBacklog) {
  // First: the callbacks of requests still pending write here until the semaphores are gone.
  Grants grants;
  Client client(redis_options());
  FairSemaphore busy(client, "backlog", of(1, "busy"));
  FairSemaphore other(client, "backlog", of(1, "other"));
  Permit held = busy.acquire();
  std::vector<AcquireRequest> requests;
  for (int i = 0; i < 1000; ++i)
    requests.push_back(busy.acquire_async(1, grants.record("busy", i)));
  ASSERT_TRUE(wait_until([&] { return busy.status().waiters.size() == 1000; }, 60s));
  // The busy tenant is served meanwhile: it has had grants, so it is ahead in virtual time.
  held.release();
  ASSERT_TRUE(grants.release(0));
  requests.push_back(other.acquire_async(1, grants.record("other", 0)));
  ASSERT_TRUE(wait_until([&] {
    for (const PermitInfo& w : other.status().waiters) {
      if (w.tenant == "other") return true;
    }
    return false;
  }));
  ASSERT_TRUE(grants.release(1));
  ASSERT_TRUE(grants.release(2));
  ASSERT_TRUE(wait_until([&] { return grants.size() >= 4; }));
  std::lock_guard<std::mutex> lock(grants.m);
  EXPECT_TRUE(grants.order[2].tenant == "other" || grants.order[3].tenant == "other")
      << grants.order[2].tenant << ", " << grants.order[3].tenant;
  requests.clear();
}

// A tenant alone gets the whole limit, at once and when units come free.
TEST_F(TenantTest, ALoneTenantHoldsTheWholeLimit) {
  FairSemaphore sem(redis_options(), "alone", of(4, "only"));
  std::vector<Permit> held;
  for (int i = 0; i < 4; ++i) {
    std::optional<Permit> p = sem.try_acquire();
    ASSERT_TRUE(p) << i;
    held.push_back(std::move(*p));
  }
  EXPECT_FALSE(sem.try_acquire());
  std::future<Permit> four = sem.acquire_async(4);
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  held.clear();
  ASSERT_EQ(std::future_status::ready, four.wait_for(30s));
  EXPECT_EQ(4, four.get().count());
}

// Waiters queued before any request named a tenant keep their place: they are the default
// tenant's queue, which competes with the tenants that come.
TEST_F(TenantTest, TheFirstTenantUpgradesTheSemaphoreWithTheQueueInPlace) {
  // First: the callbacks of requests still pending write here until the semaphores are gone.
  Grants grants;
  Client client(redis_options());
  FairSemaphore plain(client, "upgrade", options(1));
  FairSemaphore named(client, "upgrade", of(1, "x"));
  Permit held = plain.acquire();
  std::vector<AcquireRequest> requests;
  requests.push_back(plain.acquire_async(1, grants.record("", 0)));
  requests.push_back(plain.acquire_async(1, grants.record("", 1)));
  ASSERT_TRUE(wait_until([&] { return plain.status().waiters.size() == 2; }));
  EXPECT_EQ("", admin_.command({"HGET", key("upgrade", "meta"), "model"}).str);
  requests.push_back(named.acquire_async(1, grants.record("x", 0)));
  ASSERT_TRUE(wait_until([&] { return plain.status().waiters.size() == 3; }));
  EXPECT_EQ("3", admin_.command({"HGET", key("upgrade", "meta"), "model"}).str);
  held.release();
  for (std::size_t i = 0; i < 3; ++i) ASSERT_TRUE(grants.release(i));
  std::lock_guard<std::mutex> lock(grants.m);
  // Both tenants start level; the tie goes to the earlier ticket.
  EXPECT_EQ("", grants.order[0].tenant);
  EXPECT_EQ("x", grants.order[1].tenant);
  EXPECT_EQ("", grants.order[2].tenant);
  EXPECT_EQ(1, grants.order[2].index);
}

// A waiter polling (acquire with its ticket) whose own run reaps the expired holder ahead of it
// is promoted by that run, under a new ticket: the reply grants it under that ticket, the one
// its entry has, not the one it queued under (a permit whose token its renewals and release
// do not know, and lower than grants made since it queued).
TEST_F(TenantTest, AWaiterPromotedByItsOwnPollIsGrantedUnderItsNewTicket) {
  detail::Connection conn(redis_options());
  const auto acquire = [&](const std::string& id, long long ticket) {
    return run_op(
        conn, "repoll",
        {"acquire", id, "queue", "info", std::to_string(ticket), "1", "", "0", "0", "0", "t"}, "1",
        "60000");
  };
  ASSERT_EQ(1, acquire("holder", 0).elements.at(0).integer);
  const detail::Reply queued = acquire("waiter", 0);
  ASSERT_EQ(2, queued.elements.at(0).integer);
  const long long queued_ticket = queued.elements.at(1).integer;
  // The holder's lease ran out (its process died): only the waiter's poll will notice.
  admin_.command({"ZADD", key("repoll", "time"), "1", "holder"});
  const detail::Reply polled = acquire("waiter", queued_ticket);
  ASSERT_EQ(1, polled.elements.at(0).integer);
  const std::string score = admin_.command({"ZSCORE", key("repoll", "owner"), "waiter"}).str;
  EXPECT_EQ(score, std::to_string(polled.elements.at(1).integer));
  EXPECT_GT(polled.elements.at(1).integer, queued_ticket);
}

TEST_F(TenantTest, StatusAddsUpEachTenant) {
  Client client(redis_options());
  SemaphoreAdmin admin(client, "counted", prefix_);
  admin.set_tenant_weight("b", 3);
  FairSemaphore a(client, "counted", of(3, "a"));
  FairSemaphore b(client, "counted", of(3, "b"));
  Permit a1 = a.acquire(2);
  Permit b1 = b.acquire();
  std::future<Permit> a2 = a.acquire_async(2);
  ASSERT_TRUE(wait_until([&] { return admin.status().waiters.size() == 1; }));
  const Status s = admin.status();
  ASSERT_EQ(2u, s.tenants.size());
  EXPECT_EQ("a", s.tenants[0].name);
  EXPECT_EQ(1, s.tenants[0].weight);
  EXPECT_EQ(2, s.tenants[0].held);
  EXPECT_EQ(2, s.tenants[0].waiting);
  EXPECT_EQ(1, s.tenants[0].waiters);
  EXPECT_TRUE(s.tenants[0].oldest_wait.has_value());
  EXPECT_EQ("b", s.tenants[1].name);
  EXPECT_EQ(3, s.tenants[1].weight);
  EXPECT_EQ(1, s.tenants[1].held);
  EXPECT_EQ("a", s.holders[0].tenant);
  EXPECT_EQ("b", s.holders[1].tenant);
  a1.release();
  ASSERT_EQ(std::future_status::ready, a2.wait_for(30s));
}

TEST_F(TenantTest, BadWeightsAndTenantsAreRefusedBeforeAnythingIsSent) {
  SemaphoreAdmin admin(redis_options(), "refused", prefix_);
  const auto before = snapshot();
  const long long evalsha = calls("evalsha") + calls("fcall");
  EXPECT_THROW((void)admin.set_tenant_weight("a", 0), InvalidArgument);
  EXPECT_THROW((void)admin.set_tenant_weight("a", -3), InvalidArgument);
  EXPECT_THROW((void)admin.set_tenant_weight(std::string("a\n"), 2), InvalidArgument);
  EXPECT_THROW((void)admin.set_tenant_weight(std::string(kMaxTenantLength + 1, 't'), 2),
               InvalidArgument);
  EXPECT_EQ(evalsha, calls("evalsha") + calls("fcall"));
  EXPECT_EQ(before, snapshot());
  SemaphoreOptions o = of(1, std::string("\x01"));
  EXPECT_THROW(FairSemaphore(redis_options(), "refused", o), InvalidArgument);
  // The default weight removes a stored one.
  EXPECT_EQ(1, admin.set_tenant_weight("a", 5));
  EXPECT_EQ(5, admin.set_tenant_weight("a", 1));
  EXPECT_EQ(0, admin_.command({"HLEN", key("refused", "meta:weights")}).integer);
}

}  // namespace
}  // namespace fairsem
