// A semaphore shared with clients of the previous release (0.2.0) during a rolling upgrade:
// 0.2.0 waiters wait on their own wake lists, this version's on their Client's inbox. Each
// side's release must keep the other side's waiters served: a 0.2.0 waiter promoted by this
// version is woken through its own list (it never learns of inboxes), and a waiter of this
// version promoted by a 0.2.0 client (which pushes to the waiter's own list) finds its grant by
// polling. The 0.2.0 client here is its released scripts (previous_release/), run with EVAL on
// a connection of its own, and its BRPOP on its wake list.

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "previous_client.hpp"
#include "semaphore_fixture.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using detail::Connection;
using detail::Reply;
using test::wait_until;

/// A client of 0.2.0 on semaphore `name`, with its calls as the tests below make them.
class PreviousClient {
 public:
  PreviousClient(const std::string& prefix, const std::string& name, long long limit,
                 std::chrono::milliseconds lease)
      : client_("0.2.0", test::redis_options(), prefix, name, limit, lease) {}

  /// acquire ID queue: {state, ticket, ...} (state 1 granted, 2 queued).
  Reply queue(const std::string& id) { return client_.acquire(id, "queue"); }
  Reply release(const std::string& id, long long ticket) { return client_.release(id, ticket); }
  /// What 0.2.0's waker does for one waiter: BRPOP on its own wake list.
  Reply wait_for_wake_up(const std::string& id) { return client_.wait_for_wake_up(id, 20s); }

 private:
  test::PreviousClient client_;
};

class PreviousReleaseTest : public test::SemaphoreFixture {};

TEST_F(PreviousReleaseTest, WaitersOfBothVersionsAreServedInTicketOrderWhoeverReleases) {
  // A short lease, so that this version's waiter, promoted by a 0.2.0 release it is not woken
  // by, polls soon (every lease / 3).
  const auto lease = 1500ms;
  FairSemaphore sem(test::redis_options(), "mixed", options(1, lease));
  PreviousClient old(prefix_, "mixed", 1, 60s);

  Permit holder = sem.acquire();
  // In line: a 0.2.0 waiter, one of this version, another 0.2.0 waiter.
  const Reply first = old.queue("old-1");
  ASSERT_EQ(first.elements.at(0).integer, 2) << "old-1 did not queue";
  std::future<Permit> second = sem.acquire_async();
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 2; }));
  const Reply third = old.queue("old-3");
  ASSERT_EQ(third.elements.at(0).integer, 2) << "old-3 did not queue";

  // This version releases: the 0.2.0 waiter is woken through its own list.
  std::future<Reply> woken_first =
      std::async(std::launch::async, [&] { return old.wait_for_wake_up("old-1"); });
  ASSERT_EQ(holder.release(), ReleaseResult::released);
  const Reply w1 = woken_first.get();
  ASSERT_EQ(w1.elements.size(), 2U) << "old-1 was not woken";
  const long long ticket_1 = first.elements.at(1).integer;
  EXPECT_EQ(w1.elements[1].str, std::to_string(ticket_1) + ":0");

  // 0.2.0 releases: this version's waiter is not woken (0.2.0 pushes to its own list) but
  // finds its grant when it polls.
  EXPECT_EQ(old.release("old-1", ticket_1).elements.at(0).integer, 1);
  ASSERT_EQ(second.wait_for(20s), std::future_status::ready) << "the waiter never found its grant";
  Permit granted = second.get();
  EXPECT_GT(granted.fencing_token(), ticket_1);
  EXPECT_LT(granted.fencing_token(), third.elements.at(1).integer);

  // And this version's release wakes the last 0.2.0 waiter.
  std::future<Reply> woken_third =
      std::async(std::launch::async, [&] { return old.wait_for_wake_up("old-3"); });
  ASSERT_EQ(granted.release(), ReleaseResult::released);
  const Reply w3 = woken_third.get();
  ASSERT_EQ(w3.elements.size(), 2U) << "old-3 was not woken";
  EXPECT_EQ(w3.elements[1].str, std::to_string(third.elements.at(1).integer) + ":0");
  EXPECT_EQ(old.release("old-3", third.elements.at(1).integer).elements.at(0).integer, 1);

  const Status s = sem.status();
  EXPECT_TRUE(s.holders.empty());
  EXPECT_TRUE(s.waiters.empty());
  // Nothing of either version is left in the info hash.
  EXPECT_EQ(0, integer({"EXISTS", key("mixed", "info")}));
}

TEST_F(PreviousReleaseTest, AFieldThePreviousReleaseLeavesGoesWithTheIdsNextEntry) {
  // 0.2.0 removes entries without knowing of the {inbox} field: its release of a permit that
  // queued with this version (a caller-chosen permit_id both use) leaves the field behind; this
  // version's next removal of an entry of that id takes it away.
  SemaphoreOptions o = options(1, 60s);
  o.permit_id = "shared-id";
  FairSemaphore holder_sem(test::redis_options(), "leftover", options(1, 60s));
  FairSemaphore sem(test::redis_options(), "leftover", o);
  PreviousClient old(prefix_, "leftover", 1, 60s);
  Permit holder = holder_sem.acquire();
  std::future<Permit> waiting = sem.acquire_async();
  ASSERT_TRUE(wait_until([&] { return sem.status().waiters.size() == 1; }));
  EXPECT_EQ(1, integer({"HEXISTS", key("leftover", "info"), "{inbox}shared-id"}));
  ASSERT_EQ(holder.release(), ReleaseResult::released);
  ASSERT_EQ(waiting.wait_for(20s), std::future_status::ready);
  Permit p = waiting.get();
  // The previous release gives the permit back (as a 0.2.0 process holding that id would).
  EXPECT_EQ(old.release("shared-id", p.fencing_token()).elements.at(0).integer, 1);
  EXPECT_EQ(1, integer({"HEXISTS", key("leftover", "info"), "{inbox}shared-id"}));
  // (This version's handle of that permit finds it gone: 0.2.0 kept its receipt in a key of its
  // own, which this version does not read. Nothing to do either way.)
  p.release();
  // This version takes the id again and releases it: the field goes with the entry.
  std::optional<Permit> again = sem.try_acquire();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->release(), ReleaseResult::released);
  EXPECT_EQ(0, integer({"EXISTS", key("leftover", "info")}));
}

TEST_F(PreviousReleaseTest, AQueuedFieldTheLastReleaseLeftGoesWhenThisVersionsLastHolderLeaves) {
  // 0.3.1 removes entries without knowing of the {queued} field: its reap of an expired waiter
  // of this version leaves the field behind, under an id that is never used again. This
  // version's last holder out deletes whatever info still holds.
  FairSemaphore sem(test::redis_options(), "queued", options(1, 60s));
  test::PreviousClient old(test::kPreviousRelease, test::redis_options(), prefix_, "queued", 1,
                           60s);
  Permit holder = sem.acquire();
  // A waiter of this version with a short lease that nobody renews (its process died).
  Connection raw(test::redis_options());
  const std::vector<std::string> keys = script_keys("queued");
  const Reply queued =
      raw.eval(detail::scripts::semaphore_acquire, detail::Args(keys.begin(), keys.end()),
               {"acquire", "1", "100", "gone", "queue", "host:1"});
  ASSERT_EQ(queued.elements.at(0).integer, 2);
  ASSERT_EQ(1, integer({"HEXISTS", key("queued", "info"), "{queued}gone"}));
  const long long deadline =
      std::stoll(admin_.command({"ZSCORE", key("queued", "time"), "gone"}).str);
  ASSERT_TRUE(wait_until([&] { return server_ms() > deadline; }));
  // 0.3.1's try finds the semaphore full and reaps the waiter, leaving its {queued} field.
  EXPECT_EQ(old.acquire("old-try", "try").elements.at(0).integer, 0);
  EXPECT_EQ(1, integer({"ZCARD", key("queued", "time")}));  // the holder only
  EXPECT_EQ(1, integer({"HEXISTS", key("queued", "info"), "{queued}gone"}));
  ASSERT_EQ(holder.release(), ReleaseResult::released);
  EXPECT_EQ(0, integer({"EXISTS", key("queued", "info")}));
}

}  // namespace
}  // namespace fairsem
