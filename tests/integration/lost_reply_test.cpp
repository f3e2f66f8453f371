// Lost replies: when a connection drops after the server ran a semaphore operation, the client
// runs it again with the same permit id and gets the same permit, never a second one; a release
// run again after a lost reply is harmless.
//
// A CuttingProxy between the semaphore and the real redis-server lets Redis run the marked
// request and then drops its reply and hangs up; CLIENT KILL drops connections server-side.
// Every check of what was granted reads the semaphore's keys over a direct admin connection.
// Each scenario uses a limit above what it holds, so a retry under a fresh id would be
// visible as a second ticket.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fairsem/impl/net/connection.hpp>
#include <fairsem/impl/protocol/scripts.hpp>
#include <fairsem/semaphore.hpp>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "cutting_proxy.hpp"
#include "proxied_redis.hpp"
#include "script_command.hpp"
#include "test_env.hpp"
#include "wait.hpp"

namespace {

using fairsem::ConnectionError;
using fairsem::ConnectionOptions;
using fairsem::FairSemaphore;
using fairsem::LogLevel;
using fairsem::Permit;
using fairsem::ReleaseResult;
using fairsem::SemaphoreOptions;
using fairsem::detail::Args;
using fairsem::detail::Connection;
using fairsem::detail::Reply;
using fairsem::test::CuttingProxy;
using fairsem::test::redis_options;
using fairsem::test::script_command;
using fairsem::test::unique_prefix;
using fairsem::test::wait_until;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::Pair;
using ::testing::StartsWith;
using namespace std::chrono_literals;

constexpr auto kWait = 20s;
const std::string kName = "lost-reply";

using fairsem::test::through;
using fairsem::test::upstream_port;

/// Collects what the semaphore logs (the warning about a re-run script, for instance).
class Messages {
 public:
  void add(std::string_view m) {
    std::lock_guard<std::mutex> lock(mu_);
    all_.emplace_back(m);
  }
  std::vector<std::string> all() const {
    std::lock_guard<std::mutex> lock(mu_);
    return all_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> all_;
};

/// Joins its thread on destruction, so a failed ASSERT cannot leave a joinable std::thread.
struct ScopedThread {
  std::thread thread;
  ~ScopedThread() { join(); }
  void join() {
    if (thread.joinable()) thread.join();
  }
};

/// try_acquire_for(kWait) on a thread of its own; joined by join() or the destructor.
struct BackgroundWaiter {
  explicit BackgroundWaiter(FairSemaphore& semaphore) {
    runner.thread = std::thread([this, &semaphore] {
      try {
        granted = semaphore.try_acquire_for(kWait);
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
  }
  void join() { runner.join(); }

  std::optional<Permit> granted;
  std::string error;
  ScopedThread runner;  // last: joined before the results above are destroyed
};

/// Holds back every write command (the semaphore's FCALL or EVALSHA included) while it lives.
class PausedWrites {
 public:
  explicit PausedWrites(Connection& admin) : admin_(admin) {
    admin_.command({"CLIENT", "PAUSE", "60000", "WRITE"});
  }
  ~PausedWrites() {
    try {
      end();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "CLIENT UNPAUSE failed: " << e.what();
    }
  }
  PausedWrites(const PausedWrites&) = delete;
  PausedWrites& operator=(const PausedWrites&) = delete;
  void end() {
    if (!paused_) return;
    paused_ = false;
    admin_.command({"CLIENT", "UNPAUSE"});
  }

 private:
  Connection& admin_;
  bool paused_ = true;
};

class LostReplyTest : public ::testing::Test {
 protected:
  LostReplyTest()
      : admin_(redis_options()),
        prefix_(unique_prefix()),
        script_keys_(fairsem::detail::semaphore_keys(prefix_, kName)) {
    // A new counter starts at the server's clock times 1024; one set before the first acquire
    // makes the tickets t(1), t(2), ... that these tests name.
    admin_.command({"SET", key("counter"), std::to_string(kBase)});
  }

  /// The n-th ticket handed out, and as a script argument.
  static constexpr long long kBase = 1000;
  static long long t(long long n) { return kBase + n; }
  static std::string ts(long long n) { return std::to_string(t(n)); }

  std::string key(std::string_view suffix) const {
    return prefix_ + ":{" + kName + "}:" + std::string(suffix);
  }

  /// Semaphore options for these tests: no watchdog (so the only traffic is the test's own
  /// calls), a lease far longer than any test, and a logger that records.
  SemaphoreOptions options(long long limit) const {
    SemaphoreOptions o;
    o.limit = limit;
    o.key_prefix = prefix_;
    o.lease = 60s;
    o.auto_renew = false;
    o.logger = [messages = messages_](LogLevel, std::string_view m) { messages->add(m); };
    return o;
  }

  /// Tickets handed out so far (the counter key).
  long long counter() {
    Reply r = admin_.command({"GET", key("counter")});
    return r.type == Reply::Type::nil ? 0 : std::stoll(r.str);
  }

  /// Holders and waiters: permit id -> ticket, in ticket order.
  std::vector<std::pair<std::string, long long>> owners() {
    Reply r = admin_.command({"ZRANGE", key("owner"), "0", "-1", "WITHSCORES"});
    std::vector<std::pair<std::string, long long>> out;
    for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2) {
      out.emplace_back(r.elements[i].str, std::stoll(r.elements[i + 1].str));
    }
    return out;
  }

  long long cardinality(std::string_view type_command, std::string_view suffix) {
    return admin_.command({type_command, key(suffix)}).integer;
  }

  /// `permit` is the only permit in Redis, under its own id and ticket, and it was the only
  /// ticket ever handed out.
  void expect_sole_holder(const Permit& permit) {
    EXPECT_EQ(counter(), t(1)) << "a second ticket was handed out";
    EXPECT_THAT(owners(), ElementsAre(Pair(permit.id(), permit.fencing_token())));
    EXPECT_EQ(cardinality("ZCARD", "time"), 1);
    EXPECT_EQ(cardinality("HLEN", "info"), 1);
  }

  /// The proxy cut exactly one reply, an acquire that granted `permit`'s ticket, and the
  /// semaphore had to connect again to get its answer.
  void expect_acquire_reply_was_cut(const CuttingProxy& proxy, const Permit& permit) {
    EXPECT_FALSE(proxy.armed());
    ASSERT_EQ(proxy.cuts(), 1u);
    // {state 1 (granted), ticket, deadline, position, now, slot}
    EXPECT_THAT(proxy.dropped_replies()[0],
                StartsWith("*6\r\n:1\r\n:" + std::to_string(permit.fencing_token()) + "\r\n"));
    EXPECT_GE(proxy.accepts(), 2u);
    EXPECT_THAT(messages_->all(), Contains(HasSubstr("acquire")));
  }

  Args script_args() const { return Args(script_keys_.begin(), script_keys_.end()); }

  /// Runs the semaphore script directly, with limit 1 and a 60 s lease: {op, args...}.
  Reply run_script(Connection& conn, const Args& args) const {
    Args full{args[0], "1", "60000"};
    full.insert(full.end(), args.begin() + 1, args.end());
    return conn.eval(fairsem::detail::scripts::semaphore_script(args[0]), script_args(), full);
  }

  /// The ids of every client connection except the admin's.
  std::vector<std::string> other_clients() {
    const long long self = admin_.command({"CLIENT", "ID"}).integer;
    std::vector<std::string> ids;
    std::istringstream lines(admin_.command({"CLIENT", "LIST", "TYPE", "normal"}).str);
    for (std::string line; std::getline(lines, line);) {
      const auto at = line.find("id=");
      if (at != 0) continue;
      const std::string id = line.substr(3, line.find(' ') - 3);
      if (std::stoll(id) != self) ids.push_back(id);
    }
    return ids;
  }

  /// Kills every client connection but the admin's; returns their ids.
  std::vector<std::string> kill_other_clients() {
    std::vector<std::string> ids = other_clients();
    for (const std::string& id : ids) admin_.command({"CLIENT", "KILL", "ID", id});
    return ids;
  }

  /// The semaphore had to connect again: none of its connections now is one of `killed`.
  void expect_reconnected(const std::vector<std::string>& killed) {
    const std::vector<std::string> now = other_clients();
    EXPECT_THAT(now, Not(IsEmpty()));
    for (const std::string& id : now) EXPECT_THAT(killed, Not(Contains(id)));
  }

  /// The id of a client blocked in a script call, FCALL or EVALSHA (postponed by CLIENT
  /// PAUSE), or "" if none is.
  std::string client_blocked_in_script() {
    std::istringstream lines(admin_.command({"CLIENT", "LIST", "TYPE", "normal"}).str);
    for (std::string line; std::getline(lines, line);) {
      const bool in_script = line.find(" cmd=evalsha ") != std::string::npos ||
                             line.find(" cmd=fcall ") != std::string::npos;
      if (line.find(" flags=b ") != std::string::npos && in_script && line.rfind("id=", 0) == 0) {
        return line.substr(3, line.find(' ') - 3);
      }
    }
    return {};
  }

  /// Runs `call` on a thread while writes are paused, kills its connection once it is blocked
  /// in a script call (the script then runs when the pause ends, its reply going nowhere), and
  /// returns what `call` threw ("" if nothing).
  std::string with_connection_killed_in_script(const std::function<void()>& call) {
    std::string error;
    ScopedThread caller;  // declared first: joined after the pause has ended
    PausedWrites pause(admin_);
    caller.thread = std::thread([&] {
      try {
        call();
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
    std::string id;
    if (!wait_until([&] { return !(id = client_blocked_in_script()).empty(); })) {
      return "no client was ever blocked in a script call";  // the pause ends, the thread is joined
    }
    EXPECT_EQ(admin_.command({"CLIENT", "KILL", "ID", id}).integer, 1);
    pause.end();
    caller.join();
    return error;
  }

  Connection admin_;
  const std::string prefix_;
  std::vector<std::string> script_keys_;
  std::shared_ptr<Messages> messages_ = std::make_shared<Messages>();
};

// --- The proxy itself ------------------------------------------------------------------------

TEST_F(LostReplyTest, ProxyRunsTheMarkedRequestButDropsOnlyItsReply) {
  CuttingProxy proxy(upstream_port());
  Connection c(through(proxy));
  const std::string k = key("probe");
  EXPECT_EQ(c.command({"INCR", k}).integer, 1);
  proxy.cut_reply_to("incr", k);  // the command name is matched case-insensitively
  EXPECT_TRUE(proxy.armed());
  EXPECT_EQ(c.command({"GET", k}).str, "1");  // the argument matches, the command does not
  EXPECT_THROW(c.command({"INCR", k}), ConnectionError);
  EXPECT_FALSE(proxy.armed());
  ASSERT_EQ(proxy.cuts(), 1u);
  EXPECT_EQ(proxy.dropped_replies()[0], ":2\r\n");
  EXPECT_EQ(admin_.command({"GET", k}).str, "2");  // Redis ran it
  // One-shot: the connection made again passes everything.
  EXPECT_EQ(c.command({"INCR", k}).integer, 3);
  EXPECT_EQ(proxy.accepts(), 2u);
  EXPECT_EQ(proxy.requests(), 4u);
  EXPECT_EQ(proxy.cuts(), 1u);
}

// --- Acquire whose reply is lost -------------------------------------------------------------

TEST_F(LostReplyTest, TryAcquireWhoseReplyIsLostReturnsTheSamePermit) {
  CuttingProxy proxy(upstream_port());
  FairSemaphore sem(through(proxy), kName, options(2));
  ASSERT_EQ(proxy.accepts(), 1u);

  proxy.cut_reply_to(script_command(admin_), "acquire");
  std::optional<Permit> permit = sem.try_acquire();
  ASSERT_TRUE(permit.has_value());
  expect_acquire_reply_was_cut(proxy, *permit);
  EXPECT_EQ(permit->fencing_token(), t(1));
  expect_sole_holder(*permit);

  EXPECT_EQ(permit->release(), ReleaseResult::released);
  EXPECT_THAT(owners(), IsEmpty());
  EXPECT_EQ(counter(), t(1));
}

TEST_F(LostReplyTest, AcquireWhoseReplyIsLostReturnsTheSamePermit) {
  CuttingProxy proxy(upstream_port());
  FairSemaphore sem(through(proxy), kName, options(2));
  ASSERT_EQ(proxy.accepts(), 1u);

  proxy.cut_reply_to(script_command(admin_), "acquire");
  Permit permit = sem.acquire();
  ASSERT_TRUE(permit.held());
  expect_acquire_reply_was_cut(proxy, permit);
  EXPECT_EQ(permit.fencing_token(), t(1));
  expect_sole_holder(permit);

  EXPECT_EQ(permit.release(), ReleaseResult::released);
  EXPECT_THAT(owners(), IsEmpty());
}

// With a tenant named, the FRESH argument is not the last one: the retry after a lost reply
// clears FRESH (so the script looks for the entry the lost run made) and keeps the tenant.
TEST_F(LostReplyTest, ATenantsAcquireWhoseReplyIsLostReturnsTheSamePermitUnderItsTenant) {
  CuttingProxy proxy(upstream_port());
  SemaphoreOptions o = options(2);
  o.tenant = "t";
  FairSemaphore sem(through(proxy), kName, o);
  ASSERT_EQ(proxy.accepts(), 1u);

  proxy.cut_reply_to(script_command(admin_), "acquire");
  std::optional<Permit> permit = sem.try_acquire();
  ASSERT_TRUE(permit.has_value());
  expect_acquire_reply_was_cut(proxy, *permit);
  EXPECT_EQ(permit->fencing_token(), t(1));
  EXPECT_EQ(permit->slots(), (std::vector<long long>{0}));
  EXPECT_EQ(counter(), t(1)) << "a second ticket was handed out";
  EXPECT_THAT(owners(), ElementsAre(Pair(permit->id(), t(1))));
  EXPECT_EQ(admin_.command({"HGET", key("info"), "{tenant}" + permit->id()}).str, "t");
  EXPECT_EQ(permit->release(), ReleaseResult::released);
}

// Weighted: run again after its reply was lost, an acquire of 3 units returns the same permit
// with the same 3 slots, and a partial release returns the units once.
TEST_F(LostReplyTest, AWeightedAcquireAndAPartialReleaseWhoseRepliesAreLostHappenOnce) {
  CuttingProxy proxy(upstream_port());
  FairSemaphore sem(through(proxy), kName, options(4));

  proxy.cut_reply_to(script_command(admin_), "acquire");
  Permit permit = sem.acquire(3);
  ASSERT_TRUE(permit.held());
  EXPECT_FALSE(proxy.armed());
  ASSERT_EQ(proxy.cuts(), 1u);
  // {state 1 (granted), ticket, deadline, position, now, slot, slot, slot}
  EXPECT_THAT(proxy.dropped_replies()[0], StartsWith("*8\r\n:1\r\n:" + ts(1) + "\r\n"));
  EXPECT_EQ(permit.slots(), (std::vector<long long>{0, 1, 2}));
  expect_sole_holder(permit);

  proxy.cut_reply_to(script_command(admin_), "keep");
  EXPECT_EQ(permit.release(2), ReleaseResult::released);
  ASSERT_EQ(proxy.cuts(), 2u);
  EXPECT_EQ(permit.slots(), (std::vector<long long>{0}));
  EXPECT_EQ(admin_.command({"HGET", key("slots"), permit.id()}).str, "0");
  EXPECT_EQ(cardinality("ZCARD", "free"), 2);  // 1 and 2, given back once
  EXPECT_EQ(permit.release(), ReleaseResult::released);
  EXPECT_THAT(owners(), IsEmpty());
}

TEST_F(LostReplyTest, CallerChosenPermitIdSurvivesALostAcquireReply) {
  CuttingProxy proxy(upstream_port());
  SemaphoreOptions opts = options(2);
  opts.permit_id = "job-42";
  FairSemaphore sem(through(proxy), kName, opts);

  proxy.cut_reply_to(script_command(admin_), "acquire");
  std::optional<Permit> permit = sem.try_acquire_for(kWait);
  ASSERT_TRUE(permit.has_value());
  EXPECT_EQ(permit->id(), "job-42");
  expect_acquire_reply_was_cut(proxy, *permit);
  expect_sole_holder(*permit);

  EXPECT_EQ(permit->release(), ReleaseResult::released);
  EXPECT_THAT(owners(), IsEmpty());
}

TEST_F(LostReplyTest, WaiterWhoseWakeUpIsLostKeepsItsTicket) {
  CuttingProxy proxy(upstream_port());
  FairSemaphore waiting(through(proxy), kName, options(1));
  FairSemaphore holding(redis_options(), kName, options(1));
  std::optional<Permit> held = holding.try_acquire();
  ASSERT_TRUE(held.has_value());

  // A promoted waiter learns of its grant from the reply to its BRPOP: that reply is lost.
  proxy.cut_reply_to("BRPOP");
  BackgroundWaiter waiter(waiting);
  std::optional<Permit>& granted = waiter.granted;
  ASSERT_TRUE(wait_until([&] { return owners().size() == 2; })) << "the waiter never queued";
  ASSERT_TRUE(wait_until([&] {
    return admin_.command({"INFO", "clients"}).str.find("blocked_clients:1") != std::string::npos;
  })) << "the waiter never blocked in BRPOP";
  EXPECT_EQ(held->release(), ReleaseResult::released);
  waiter.join();

  ASSERT_EQ(waiter.error, "");
  ASSERT_TRUE(granted.has_value()) << "the waiter was not granted";
  EXPECT_EQ(granted->fencing_token(), t(2));
  EXPECT_FALSE(proxy.armed());
  ASSERT_EQ(proxy.cuts(), 1u);
  // {inbox, "ID TICKET:SLOT"}: the wake-up went to this waiter and was lost; its next call
  // found it.
  EXPECT_THAT(proxy.dropped_replies()[0], HasSubstr(granted->id() + " " + ts(2) + ":0"));
  EXPECT_GE(proxy.accepts(), 2u);
  EXPECT_EQ(counter(), t(2)) << "the waiter took a second ticket";
  EXPECT_THAT(owners(), ElementsAre(Pair(granted->id(), t(2))));
  EXPECT_EQ(granted->release(), ReleaseResult::released);
}

// --- Release whose reply is lost -------------------------------------------------------------

TEST_F(LostReplyTest, ReleaseWhoseReplyIsLostReportsReleasedAndPromotesTheWaiter) {
  CuttingProxy proxy(upstream_port());
  FairSemaphore holder(through(proxy), kName, options(1));
  FairSemaphore other(redis_options(), kName, options(1));
  std::optional<Permit> held = holder.try_acquire();
  ASSERT_TRUE(held.has_value());

  BackgroundWaiter waiter(other);
  std::optional<Permit>& granted = waiter.granted;
  ASSERT_TRUE(wait_until([&] { return owners().size() == 2; })) << "the waiter never queued";

  proxy.cut_reply_to(script_command(admin_), "release");
  EXPECT_EQ(held->release(), ReleaseResult::released);
  EXPECT_FALSE(held->lost());
  waiter.join();

  EXPECT_FALSE(proxy.armed());
  ASSERT_EQ(proxy.cuts(), 1u);
  EXPECT_EQ(proxy.dropped_replies()[0], "*1\r\n:1\r\n");  // a holder was released
  EXPECT_GE(proxy.accepts(), 2u);
  ASSERT_EQ(waiter.error, "");
  ASSERT_TRUE(granted.has_value()) << "the waiter was not granted";
  EXPECT_EQ(granted->fencing_token(), t(2));
  // The release run again found nothing to free; the waiter it promoted keeps its permit.
  EXPECT_THAT(owners(), ElementsAre(Pair(granted->id(), t(2))));
  EXPECT_EQ(counter(), t(2));

  EXPECT_EQ(held->release(), ReleaseResult::already_released);
  EXPECT_THAT(owners(), ElementsAre(Pair(granted->id(), t(2))));
  EXPECT_EQ(granted->release(), ReleaseResult::released);
  EXPECT_THAT(owners(), IsEmpty());
}

// --- Connections killed server-side ----------------------------------------------------------

TEST_F(LostReplyTest, ConnectionsKilledBetweenCallsGrantNothingTwice) {
  FairSemaphore sem(redis_options(), kName, options(3));
  // Calls run one at a time, so the semaphore keeps one pooled connection, killed each time.
  std::vector<std::string> killed = kill_other_clients();
  ASSERT_THAT(killed, Not(IsEmpty()));
  std::optional<Permit> first = sem.try_acquire();
  expect_reconnected(killed);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->fencing_token(), t(1));
  expect_sole_holder(*first);

  killed = kill_other_clients();
  Permit second = sem.acquire();
  expect_reconnected(killed);
  EXPECT_EQ(second.fencing_token(), t(2));
  EXPECT_EQ(counter(), t(2));
  EXPECT_THAT(owners(), ElementsAre(Pair(first->id(), t(1)), Pair(second.id(), t(2))));

  killed = kill_other_clients();
  EXPECT_EQ(first->release(), ReleaseResult::released);
  expect_reconnected(killed);
  EXPECT_THAT(owners(), ElementsAre(Pair(second.id(), t(2))));

  killed = kill_other_clients();
  EXPECT_EQ(second.release(), ReleaseResult::released);
  expect_reconnected(killed);
  EXPECT_THAT(owners(), IsEmpty());
  EXPECT_EQ(counter(), t(2));
  EXPECT_EQ(cardinality("ZCARD", "time"), 0);
  EXPECT_EQ(cardinality("HLEN", "info"), 0);
}

// A release retried after a dropped connection must still tell an expired permit apart from
// one it released: only a receipt left by a run that removed the permit means "released".
TEST_F(LostReplyTest, RetriedReleaseOfAnExpiredPermitReportsExpired) {
  SemaphoreOptions o = options(1);
  o.lease = 300ms;
  FairSemaphore sem(redis_options(), kName, o);
  std::optional<Permit> p = sem.try_acquire();
  ASSERT_TRUE(p.has_value());
  ASSERT_TRUE(wait_until([&] { return sem.status().holders.empty(); }));  // expired, reaped
  const std::vector<std::string> killed = kill_other_clients();
  ASSERT_THAT(killed, Not(IsEmpty()));
  EXPECT_EQ(p->release(), ReleaseResult::expired);
  expect_reconnected(killed);
  EXPECT_TRUE(p->lost());
}

TEST_F(LostReplyTest, ConnectionsKilledWhileTheScriptIsInFlightGrantNothingTwice) {
  FairSemaphore sem(redis_options(), kName, options(2));
  std::optional<Permit> permit;
  ASSERT_EQ(with_connection_killed_in_script([&] { permit = sem.try_acquire(); }), "");
  ASSERT_TRUE(permit.has_value());
  EXPECT_EQ(permit->fencing_token(), t(1));
  expect_sole_holder(*permit);

  std::optional<ReleaseResult> released;
  ASSERT_EQ(with_connection_killed_in_script([&] { released = permit->release(); }), "");
  EXPECT_EQ(released, ReleaseResult::released);
  EXPECT_THAT(owners(), IsEmpty());
  EXPECT_EQ(counter(), t(1));
}

// --- The script on its own -------------------------------------------------------------------

TEST_F(LostReplyTest, ScriptAcquireRunTwiceForOneIdReturnsTheSameTicket) {
  Connection conn(redis_options());
  const Args keys = script_args();
  auto acquire = [&](const std::string& id, const char* mode) {
    Reply r = conn.eval(fairsem::detail::scripts::semaphore_acquire, keys,
                        {"acquire", "2", "60000", id, mode, "test-owner"});
    EXPECT_EQ(r.elements.size(), 6u);
    return r;
  };

  Reply first = acquire("a", "try");
  EXPECT_EQ(first.elements[0].integer, 1);     // granted
  EXPECT_EQ(first.elements[1].integer, t(1));  // ticket
  for (const char* mode : {"try", "queue"}) {
    Reply again = acquire("a", mode);
    EXPECT_EQ(again.elements[0].integer, 1) << mode;
    EXPECT_EQ(again.elements[1].integer, t(1)) << mode;
    EXPECT_EQ(again.elements[3].integer, 0) << mode;
  }
  EXPECT_EQ(counter(), t(1));
  EXPECT_THAT(owners(), ElementsAre(Pair("a", t(1))));

  // Another id is another ticket: the checks above would have seen a duplicate.
  EXPECT_EQ(acquire("b", "try").elements[1].integer, t(2));
  EXPECT_EQ(counter(), t(2));
}

TEST_F(LostReplyTest, ScriptReleaseRunTwiceForOneIdIsHarmless) {
  Connection conn(redis_options());
  auto run = [&](const Args& args) { return run_script(conn, args); };

  EXPECT_EQ(run({"acquire", "a", "try", "o"}).elements[0].integer, 1);
  // A waiter that repeats its acquire keeps its place and ticket.
  for (int i = 0; i < 2; ++i) {
    Reply queued = run({"acquire", "b", "queue", "o"});
    ASSERT_EQ(queued.elements.size(), 6u);
    EXPECT_EQ(queued.elements[0].integer, 2);     // queued
    EXPECT_EQ(queued.elements[1].integer, t(2));  // ticket
    EXPECT_EQ(queued.elements[3].integer, 1);     // first in line
  }
  EXPECT_EQ(counter(), t(2));

  Reply released = run({"release", "a", ts(1), "60000"});
  ASSERT_EQ(released.elements.size(), 1u);
  EXPECT_EQ(released.elements[0].integer, 1);
  EXPECT_EQ(admin_.command({"LLEN", key("wake:b")}).integer, 1);  // b was woken once

  // The repeat finds the receipt the first run left: 3, "released earlier", not 0 ("expired").
  Reply again = run({"release", "a", ts(1), "60000"});
  ASSERT_EQ(again.elements.size(), 1u);
  EXPECT_EQ(again.elements[0].integer, 3);
  // The repeat neither removed nor woke anyone else.
  EXPECT_THAT(owners(), ElementsAre(Pair("b", t(2))));
  EXPECT_EQ(admin_.command({"LLEN", key("wake:b")}).integer, 1);

  Reply promoted = run({"acquire", "b", "queue", "o"});
  EXPECT_EQ(promoted.elements[0].integer, 1);
  EXPECT_EQ(promoted.elements[1].integer, t(2));
  EXPECT_EQ(run({"release", "b", ts(2), "60000"}).elements[0].integer, 1);
  EXPECT_EQ(run({"release", "b", ts(2), "60000"}).elements[0].integer, 3);
  EXPECT_THAT(owners(), IsEmpty());
  // An id that never held anything has no receipt.
  EXPECT_EQ(run({"release", "never-held", ts(1), "60000"}).elements[0].integer, 0);
  EXPECT_EQ(counter(), t(2));

  // A permit is its id and its ticket: once "a" names a later permit (ticket 3), a stale
  // release or renew of ticket 1 (a paused holder resuming, or a late retry) leaves it alone.
  EXPECT_EQ(run({"acquire", "a", "try", "o"}).elements[1].integer, t(3));
  EXPECT_EQ(run({"renew", "a", ts(1)}).elements.at(2).integer, 0);  // ticket 1: lost
  EXPECT_EQ(run({"release", "a", ts(1), "60000"}).elements[0].integer, 3);
  EXPECT_THAT(owners(), ElementsAre(Pair("a", t(3))));
  EXPECT_EQ(run({"renew", "a", ts(3)}).elements.at(2).integer, 1);  // ticket 3: holder
}

// A promoted waiter takes its grant from the wake-up alone, so a wake-up must never outlive the
// entry it was pushed for: a waiter whose entry expired (its process was paused, say) queues
// again under the same id, and must find an empty list, not the old entry's wake-up.
TEST_F(LostReplyTest, ScriptWaiterQueueingAgainDoesNotInheritAnOldWakeUp) {
  Connection conn(redis_options());
  auto run = [&](const Args& args) { return run_script(conn, args); };
  const std::string wake = key("wake:w");

  EXPECT_EQ(run({"acquire", "h", "try", "o"}).elements[0].integer, 1);
  EXPECT_EQ(run({"acquire", "w", "queue", "o"}).elements[1].integer, t(2));  // w waits
  EXPECT_EQ(run({"release", "h", ts(1), "60000"}).elements[0].integer, 1);   // promotes w
  ASSERT_EQ(admin_.command({"LLEN", wake}).integer, 1);
  // w never popped its wake-up, and its lease ran out: its deadline is in the past.
  admin_.command({"ZADD", key("time"), "1", "w"});
  // The next asker finds every permit taken, reaps w and takes the permit.
  EXPECT_EQ(run({"acquire", "x", "try", "o"}).elements[0].integer, 1);
  EXPECT_THAT(owners(), ElementsAre(Pair("x", t(3))));

  // w polls with its old ticket, finds its entry gone and queues again behind x.
  Reply again = run({"acquire", "w", "queue", "o", ts(2)});
  EXPECT_EQ(again.elements[0].integer, 2);  // queued, not granted
  EXPECT_EQ(again.elements[1].integer, t(4));
  EXPECT_EQ(admin_.command({"LLEN", wake}).integer, 0) << "the old wake-up would grant w";
  EXPECT_THAT(owners(), ElementsAre(Pair("x", t(3)), Pair("w", t(4))));
}

}  // namespace
