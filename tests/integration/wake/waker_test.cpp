// The waker hands every wake-up it pops to the request it is for, even one popped before that
// request listened: a promotion can reach a Client's inbox between the reply that queued the
// request and its subscribe(), or between a wake-up that ended its listening and its rearm()
// after the next poll. Such a wake-up is kept (for a few seconds) and handed over when the
// request listens; dropped, its waiter would wait a whole poll interval for a permit it holds.
// Driven against a real server, with pushes made as the semaphore scripts make them.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "fairsem/client.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/wake/waker.hpp"
#include "process_stats.hpp"
#include "redis_server.hpp"
#include "test_env.hpp"
#include "wait.hpp"
#include "waker_peer.hpp"

using fairsem::detail::WakerPeer;

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using detail::Connection;
using detail::Waker;
using detail::WakeSubscription;
using detail::WakeWait;
using test::RedisServer;
using test::wait_until;

class WakerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    waker_ = std::make_shared<Waker>(server_.options(), nullptr, "test", "c0ffee",
                                     ClientOptions{}.idle_timeout);
    // Another request keeps the inbox in the waker's BRPOP, so what is pushed there is popped
    // at once, whoever listens for it.
    keeper_ = waker_->subscribe(-1, wake_prefix_, "keeper", conn_);
    ASSERT_TRUE(wait_until([&] {
      return admin_.command({"INFO", "clients"}).str.find("blocked_clients:1\r") !=
             std::string::npos;
    }));
  }

  /// Pushes "ID MESSAGE" to the inbox as a promoting script does, and waits until the waker
  /// has handled it: a wake-up for the keeper pushed after it reaches the keeper.
  void push_and_wait_handled(const std::string& id, const std::string& message) {
    // BRPOP pops from the tail: the wake-up first, then the keeper's.
    admin_.command({"LPUSH", waker_->inbox(wake_prefix_), id + " " + message, "keeper sync"});
    const WakeWait synced = keeper_->wait_for(30s);
    ASSERT_TRUE(synced.woken.has_value()) << "the waker never reached the keeper's wake-up";
    ASSERT_EQ(synced.woken->elements.size(), 2U);
    ASSERT_EQ(synced.woken->elements[1].str, "sync") << "the keeper got another's wake-up";
    keeper_->rearm(conn_);
  }

  static void expect_woken(const WakeWait& w, const std::string& key, const std::string& message) {
    ASSERT_TRUE(w.woken.has_value()) << "the wake-up popped before the request listened is lost";
    ASSERT_EQ(w.woken->elements.size(), 2U);
    EXPECT_EQ(w.woken->elements[0].str, key);
    EXPECT_EQ(w.woken->elements[1].str, message);
  }

  /// Cuts off the waker's BRPOP (CLIENT KILL of the connection blocked in it), as a network
  /// fault would after it popped something, and waits until the waker has noticed: its
  /// listening waiters (the keeper) hear of it.
  void cut_brpop() {
    ASSERT_TRUE(wait_until([&] {
      return admin_.command({"INFO", "clients"}).str.find("blocked_clients:1\r") !=
             std::string::npos;
    }));
    const std::string clients = admin_.command({"CLIENT", "LIST"}).str;
    const std::size_t brpop = clients.find(" cmd=brpop");
    ASSERT_NE(brpop, std::string::npos) << clients;
    const std::size_t line = clients.rfind("id=", brpop);
    const std::string id = clients.substr(line + 3, clients.find(' ', line) - line - 3);
    admin_.command({"CLIENT", "KILL", "ID", id});
    ASSERT_TRUE(keeper_->wait_for(30s).interrupted) << "the waker did not notice the cut";
    keeper_->rearm(conn_);
  }

  /// Two wakers of one Client (one WakerGroup) on the same inbox: `popping`, whose BRPOP has
  /// the inbox (a keeper listens through it), and `other`.
  struct TwoWakers {
    std::shared_ptr<Waker> popping;
    std::shared_ptr<Waker> other;
    std::unique_ptr<WakeSubscription> keeper;
  };
  TwoWakers two_wakers() {
    auto group = std::make_shared<detail::WakerGroup>();
    const auto idle = ClientOptions{}.idle_timeout;
    TwoWakers w;
    w.popping = std::make_shared<Waker>(server_.options(), nullptr, "a", "5a5e", idle, group);
    w.other = std::make_shared<Waker>(server_.options(), nullptr, "b", "5a5e", idle, group);
    group->add(w.popping);
    group->add(w.other);
    w.keeper = w.popping->subscribe(-1, wake_prefix_, "keeper", conn_);
    return w;
  }

  /// Clients connected to the server, the one asking included.
  long long connected_clients() {
    const std::string info = admin_.command({"INFO", "clients"}).str;
    const std::string field = "connected_clients:";
    return std::stoll(info.substr(info.find(field) + field.size()));
  }

  RedisServer server_;
  Connection admin_{server_.options()};
  Connection conn_{server_.options()};
  const std::string wake_prefix_ = test::unique_prefix() + "{s}:wake:";
  std::shared_ptr<Waker> waker_;
  std::unique_ptr<WakeSubscription> keeper_;
};

TEST_F(WakerTest, AWakeUpPoppedBeforeTheRequestSubscribedIsHandedToIt) {
  push_and_wait_handled("early", "promoted 7");
  const auto sub = waker_->subscribe(-1, wake_prefix_, "early", conn_);
  expect_woken(sub->take(), wake_prefix_ + "early", "promoted 7");
  // Handed over once: the next request of that id does not get it again.
  const auto again = waker_->subscribe(-1, wake_prefix_, "early", conn_);
  EXPECT_FALSE(again->take().woken.has_value());
}

TEST_F(WakerTest, AnAsynchronousRequestsHookRunsForAWakeUpThatCameBeforeIt) {
  push_and_wait_handled("early", "promoted 8");
  std::atomic<int> hooked{0};
  const auto sub = waker_->subscribe(-1, wake_prefix_, "early", conn_, [&] { ++hooked; });
  EXPECT_EQ(hooked.load(), 1) << "the request's step was never posted";
  expect_woken(sub->take(), wake_prefix_ + "early", "promoted 8");
}

TEST_F(WakerTest, AWakeUpPoppedBetweenTheLastOneAndRearmIsHandedToIt) {
  const auto sub = waker_->subscribe(-1, wake_prefix_, "r", conn_);
  push_and_wait_handled("r", "promoted 1");
  expect_woken(sub->wait_for(30s), wake_prefix_ + "r", "promoted 1");
  // The wake-up ended its listening; before its poll's reply rearms it, another comes.
  push_and_wait_handled("r", "promoted 2");
  sub->rearm(conn_);
  expect_woken(sub->take(), wake_prefix_ + "r", "promoted 2");
}

// A BRPOP cut off may have popped a promotion, lost with its reply: every waiter whose last
// call was sent before the cut must poll at once, not a poll interval later. One whose poll was
// out when the cut came (the poll may have run before the promotion) hears of it when it
// listens again, whether the cut found it listening or not; so does one that subscribes after
// a cut that came after its first call was sent.
TEST_F(WakerTest, ABrpopCutOffWhileAPollWasOutInterruptsTheWaiterWhenItListensAgain) {
  const auto sub = waker_->subscribe(-1, wake_prefix_, "r", conn_);
  const auto poll_sent = std::chrono::steady_clock::now();
  cut_brpop();
  if (HasFatalFailure()) return;
  sub->rearm(conn_, poll_sent);
  EXPECT_TRUE(sub->take().interrupted) << "the poll's rearm forgot the cut that came after it";
  // A cut before the poll was sent: the poll answered what it could have lost.
  cut_brpop();
  if (HasFatalFailure()) return;
  sub->rearm(conn_, std::chrono::steady_clock::now());
  EXPECT_FALSE(sub->take().interrupted);
}

TEST_F(WakerTest, ABrpopCutOffWhileAWaiterDidNotListenInterruptsItWhenItListensAgain) {
  const auto sub = waker_->subscribe(-1, wake_prefix_, "r", conn_);
  push_and_wait_handled("r", "promoted 1");
  expect_woken(sub->wait_for(30s), wake_prefix_ + "r", "promoted 1");
  // The wake-up ended its listening; its poll is out when the cut comes.
  const auto poll_sent = std::chrono::steady_clock::now();
  cut_brpop();
  if (HasFatalFailure()) return;
  sub->rearm(conn_, poll_sent);
  EXPECT_TRUE(sub->take().interrupted) << "a waiter not listening at the cut never heard of it";
}

TEST_F(WakerTest, ARequestThatSubscribesAfterACutSinceItsCallWasSentIsInterrupted) {
  const auto sent = std::chrono::steady_clock::now();
  cut_brpop();
  if (HasFatalFailure()) return;
  std::atomic<int> hooked{0};
  const auto late = waker_->subscribe(
      -1, wake_prefix_, "late", conn_, [&] { ++hooked; }, sent);
  EXPECT_TRUE(late->take().interrupted) << "its promotion may have been lost before it listened";
  EXPECT_EQ(hooked.load(), 1) << "the asynchronous request's step was never posted";
  const auto after =
      waker_->subscribe(-1, wake_prefix_, "after", conn_, {}, std::chrono::steady_clock::now());
  EXPECT_FALSE(after->take().interrupted);
}

// A slot's inbox in two BRPOPs of one Client (Runtime::waker: a slot forgotten as a waiter was
// given its waker, then given to another after a failover): a wake-up one waker pops for a
// request listening through the other reaches it at once, as does one it kept before that
// request listened; not at the request's next poll.
TEST_F(WakerTest, AWakeUpPoppedByAnotherWakerOfTheClientReachesItsRequest) {
  const TwoWakers w = two_wakers();
  // Its request listens through the other waker, whose BRPOP is not under way (stopped here;
  // reconnecting, or not yet sent, in the field): the popping one's BRPOP alone has the inbox.
  w.other->stop();
  const auto sub = w.other->subscribe(-1, wake_prefix_, "r", conn_);
  admin_.command({"LPUSH", w.popping->inbox(wake_prefix_), "r promoted 1"});
  expect_woken(sub->wait_for(30s), wake_prefix_ + "r", "promoted 1");
}

TEST_F(WakerTest, AWakeUpAnotherWakerOfTheClientKeptIsHandedToTheRequestWhenItListens) {
  const TwoWakers w = two_wakers();
  // Popped (and kept) by the popping waker before the keeper's, which it hands over after.
  admin_.command({"LPUSH", w.popping->inbox(wake_prefix_), "late promoted 2", "keeper sync"});
  const WakeWait synced = w.keeper->wait_for(30s);
  ASSERT_TRUE(synced.woken.has_value()) << "the waker never reached the keeper's wake-up";
  std::atomic<int> hooked{0};
  const auto sub = w.other->subscribe(-1, wake_prefix_, "late", conn_, [&] { ++hooked; });
  expect_woken(sub->take(), wake_prefix_ + "late", "promoted 2");
  EXPECT_EQ(hooked.load(), 1) << "the asynchronous request's step was never posted";
}

// (The keeper, listening all along, gets only its own: push_and_wait_handled checks.)
TEST_F(WakerTest, ARequestListeningGetsItsWakeUpAndNobodyElses) {
  const auto sub = waker_->subscribe(-1, wake_prefix_, "mine", conn_);
  push_and_wait_handled("other", "promoted 3");
  push_and_wait_handled("mine", "promoted 4");
  expect_woken(sub->wait_for(30s), wake_prefix_ + "mine", "promoted 4");
}

// A Cluster node's slots share one thread: each slot waited on is a lane of its own (a BRPOP
// takes the keys of one slot), and what goes wrong in one lane reaches only its waiters.
TEST_F(WakerTest, OneThreadServesALanePerSlotAndARefusalStaysInItsLane) {
  const std::string other = test::unique_prefix() + "{t}:wake:";
  // The other lane's inbox is not a list: its BRPOP is refused (WRONGTYPE).
  admin_.command({"SET", waker_->inbox(other), "not a list"});
  const std::size_t threads = test::thread_count();
  const long long connections = connected_clients();
  const auto refused = waker_->subscribe(7, other, "r", conn_);
  const WakeWait w = refused->wait_for(30s);
  EXPECT_NE(w.error.find("WRONGTYPE"), std::string::npos) << "got: " << w.error;
  EXPECT_EQ(WakerPeer::lanes(*waker_), 2U);
  EXPECT_EQ(test::thread_count(), threads) << "a slot got a thread of its own";
  EXPECT_TRUE(wait_until([&] { return connected_clients() == connections + 1; }))
      << "a slot's lane has no connection of its own";
  // The keeper's lane heard nothing of it, and still hands its wake-ups over.
  EXPECT_TRUE(keeper_->take().error.empty()) << "the refusal reached another lane's waiter";
  push_and_wait_handled("x", "promoted 9");
  if (HasFatalFailure()) return;

  // Put right, the lane listens again (after its pause) and hands its waiter its wake-up. A
  // refusal of a BRPOP sent before the fix may still come: the waiter polls and rearms.
  admin_.command({"DEL", waker_->inbox(other)});
  admin_.command({"LPUSH", waker_->inbox(other), "r promoted 6"});
  WakeWait next;
  for (int refusals = 0; refusals < 3 && !next.woken; ++refusals) {
    refused->rearm(conn_);
    next = refused->wait_for(30s);
  }
  expect_woken(next, other + "r", "promoted 6");
}

// A Cluster Client that waited on many slots must not keep a thread and a connection for each.
TEST_F(WakerTest, AnIdleWakerClosesItsThreadAndConnectionAndOpensThemForTheNextRequest) {
  const auto idle = std::make_shared<Waker>(server_.options(), nullptr, "idle", "1d1e", 300ms);
  const long long before = connected_clients();
  auto first = idle->subscribe(-1, wake_prefix_, "first", conn_);
  ASSERT_TRUE(wait_until([&] { return connected_clients() == before + 1; }));
  EXPECT_TRUE(idle->running());
  first.reset();
  ASSERT_TRUE(wait_until([&] { return !idle->running(); })) << "the idle waker's thread runs on";
  EXPECT_TRUE(wait_until([&] { return connected_clients() == before; }))
      << "the idle waker's connection stays open";

  // The next request gets its wake-up through a thread and connection opened again.
  const auto next = idle->subscribe(-1, wake_prefix_, "next", conn_);
  EXPECT_TRUE(idle->running());
  admin_.command({"LPUSH", idle->inbox(wake_prefix_), "next promoted 5"});
  expect_woken(next->wait_for(30s), wake_prefix_ + "next", "promoted 5");
}

}  // namespace
}  // namespace fairsem
