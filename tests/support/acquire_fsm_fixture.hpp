#pragma once

// The fixture of AcquireFsm's unit tests (tests/unit/acquire_fsm_*test.cpp), with no server: one
// acquire's protocol fed replies, wake-ups, time-outs, cancels and errors, with its actions
// checked one by one. Time is made up (no clock is read), so the races the drivers can only
// meet by chance are spelled out: a cancel at the instant of promotion, a wake-up that arrives
// before the poll's reply.

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <ostream>
#include <utility>
#include <vector>

#include "acquire_fsm_names.hpp"
#include "acquire_fsm_peer.hpp"
#include "fairsem/impl/protocol/acquire_fsm.hpp"

namespace fairsem::detail {

// GoogleTest prints what it compares; names read better than numbers.
inline void PrintTo(AcquireAction::Kind kind, std::ostream* os) { *os << test::name_of(kind); }

inline void PrintTo(AcquireOutcome outcome, std::ostream* os) { *os << test::name_of(outcome); }

// Named, not anonymous: every acquire_fsm_*_test.cpp includes this, and a unity build compiles
// several of them as one.
namespace acquire_fsm_test {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Kind = AcquireAction::Kind;
using Event = AcquireEvent;

inline const Clock::time_point kT0{std::chrono::hours(1)};
inline constexpr long long kTicket = 7;
inline constexpr auto kLease = 10s;
inline constexpr auto kPoll = 1000ms;
inline constexpr auto kMargin = 6000ms;

inline AcquireParams queue_params() {
  AcquireParams p;
  p.units = 1;
  p.wait = true;
  p.started = kT0;
  p.poll_interval = kPoll;
  p.direct_grant_margin = kMargin;
  p.lease = kLease;
  p.jitter_seed = 42;
  return p;
}

inline AcquireReply queued(long long ticket = kTicket) {
  AcquireReply r;
  r.state = AcquireState::queued;
  r.ticket = ticket;
  r.lease = kLease;
  r.position = 1;
  return r;
}

inline AcquireReply granted(long long ticket = kTicket, std::vector<long long> slots = {0}) {
  AcquireReply r;
  r.state = AcquireState::granted;
  r.ticket = ticket;
  r.lease = kLease;
  r.slots = std::move(slots);
  return r;
}

inline AcquireReply in_state(AcquireState state) {
  AcquireReply r;
  r.state = state;
  return r;
}

inline WakeUp woken(WakeReason reason, long long ticket = kTicket,
                    std::vector<long long> slots = {0}) {
  WakeUp w;
  w.reason = reason;
  w.ticket = ticket;
  w.slots = std::move(slots);
  return w;
}

inline WakeUp promoted(long long ticket = kTicket, std::vector<long long> slots = {0}) {
  return woken(WakeReason::promoted, ticket, std::move(slots));
}

// One acquire and the time its events are told at.
class AcquireFsmTest : public ::testing::Test {
 protected:
  void make(const AcquireParams& params) { fsm.emplace(params); }

  AcquireAction feed(const AcquireEvent& event) { return fsm->resume(event); }
  AcquireAction start() { return feed(Event::start(now)); }
  AcquireAction admitted() { return feed(Event::admitted(now)); }
  AcquireAction reply(const AcquireReply& r) { return feed(Event::replied(r, now, now)); }
  AcquireAction failed(bool reached = true) { return feed(Event::failed(reached, now)); }
  // A failure that passes (the server restarting, loading, failing over).
  AcquireAction failed_passing(bool reached = true) {
    return feed(Event::failed(reached, now, true));
  }
  AcquireAction wake(const WakeUp& w) { return feed(Event::woken(w, now)); }
  AcquireAction done() { return feed(Event::done(now)); }
  AcquireAction tick() { return feed(Event::tick(now)); }
  AcquireAction cancel() { return feed(Event::cancelled(now)); }

  // A queue request made with `params`, answered queued with kTicket at kT0 and listening:
  // the action is the first wait.
  AcquireAction queue_up(const AcquireParams& params = queue_params()) {
    make(params);
    EXPECT_EQ(start().kind, Kind::wait_turn);
    EXPECT_EQ(admitted().kind, Kind::send_queue);
    EXPECT_EQ(reply(queued()).kind, Kind::subscribe);
    return done();
  }

  // Expects the action to finish with `outcome`, and the machine to be over after it.
  void expect_finish(const AcquireAction& action, AcquireOutcome outcome) {
    ASSERT_EQ(action.kind, Kind::finish);
    EXPECT_EQ(action.outcome, outcome);
    EXPECT_EQ(done().kind, Kind::none);
    EXPECT_TRUE(fsm->over());
  }

  // Expects the action to give kTicket's entry up, then to finish with `outcome`.
  void expect_leave_then_finish(const AcquireAction& action, AcquireOutcome outcome,
                                long long ticket = kTicket) {
    ASSERT_EQ(action.kind, Kind::leave);
    EXPECT_EQ(action.ticket, ticket);
    expect_finish(done(), outcome);
  }

  // Expects a cancelled outcome now, then kTicket's entry given up, then nothing.
  void expect_cancelled_then_leave(const AcquireAction& action) {
    ASSERT_EQ(action.kind, Kind::finish);
    EXPECT_EQ(action.outcome, AcquireOutcome::cancelled);
    const AcquireAction after = done();
    ASSERT_EQ(after.kind, Kind::leave);
    EXPECT_EQ(after.ticket, kTicket);
    EXPECT_EQ(done().kind, Kind::none);
    EXPECT_TRUE(fsm->over());
  }

  std::optional<AcquireFsm> fsm;
  Clock::time_point now = kT0;
};

}  // namespace acquire_fsm_test
}  // namespace fairsem::detail
