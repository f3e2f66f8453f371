// A wake-up lost with the reply of the BRPOP that popped it: the Client's waker pops a
// waiter's wake-up from its inbox, and a CuttingProxy drops that reply and closes the
// connection. The waiter must not wait for its next poll (a third of the lease: 20 s here) to
// learn that it was promoted: the waker tells every waiter that its BRPOP was cut off, and they
// poll at once.

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <optional>
#include <string>

#include "cutting_proxy.hpp"
#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "proxied_redis.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using test::CuttingProxy;
using test::wait_until;

TEST(LostWakeUpTest, AWakeUpLostWithTheBrpopReplyIsFoundAtOnceNotAtTheNextPoll) {
  SemaphoreOptions o;
  o.limit = 1;
  o.lease = 60s;  // waiters poll every 20 s: longer than any wait below
  o.key_prefix = test::unique_prefix();
  // The holder and the releasing side talk to Redis directly; the waiters (and their waker)
  // through the proxy.
  FairSemaphore direct(test::redis_options(), "lost-wake-up", o);
  CuttingProxy proxy(test::upstream_port());
  Client through_proxy(test::through(proxy));
  FairSemaphore proxied(through_proxy, "lost-wake-up", o);
  detail::Connection admin(test::redis_options());

  // Until the cut reply is the wake-up itself (and not a BRPOP that timed out first, which
  // proves nothing), and a handful of tries at most.
  bool wake_up_was_cut = false;
  for (int attempt = 0; attempt < 5 && !wake_up_was_cut; ++attempt) {
    Permit holder = direct.acquire();
    std::future<Permit> first = proxied.acquire_async();
    ASSERT_TRUE(wait_until([&] { return direct.status().waiters.size() == 1; }));
    const std::string first_id = direct.status().waiters.at(0).id;
    // The waiter's entry names its Client's inbox, which the waker's BRPOP listens on.
    const std::string client =
        admin.command({"HGET", o.key_prefix + ":{lost-wake-up}:info", "{inbox}" + first_id}).str;
    ASSERT_FALSE(client.empty()) << "the waiter's entry names no inbox";
    std::future<Permit> second = proxied.acquire_async();
    ASSERT_TRUE(wait_until([&] { return direct.status().waiters.size() == 2; }));
    // The next BRPOP on that inbox loses its reply (the waker sends one at least every second).
    // Released once the proxy has seen such a BRPOP after arming (the trigger is spent on it):
    // a release before could go to a BRPOP sent before the cut was armed.
    const std::size_t cuts_before = proxy.cuts();
    proxy.cut_reply_to("BRPOP", o.key_prefix + ":{lost-wake-up}:wake:{inbox}" + client);
    ASSERT_TRUE(wait_until([&] { return !proxy.armed(); }, 10s));
    holder.release();  // promotes the first waiter, whose wake-up the cut BRPOP pops
    ASSERT_EQ(first.wait_for(10s), std::future_status::ready)
        << "the promoted waiter did not learn of its grant before its next poll";
    Permit granted = first.get();
    EXPECT_EQ(first_id, granted.id());
    ASSERT_TRUE(wait_until([&] { return proxy.cuts() > cuts_before; }, 10s));
    const std::string cut = proxy.dropped_replies().back();
    wake_up_was_cut = cut.find(first_id) != std::string::npos;  // {inbox, "ID 1:0"}, not nil
    granted.release();
    ASSERT_EQ(second.wait_for(10s), std::future_status::ready);
    second.get().release();
  }
  EXPECT_TRUE(wake_up_was_cut) << "no try cut the BRPOP reply that carried the wake-up";
}

}  // namespace
}  // namespace fairsem
