#pragma once

// The stress harness's checker: proves the semaphore's promises from what an independent
// observer recorded (critical sections written to shared memory by the workers, faults written
// by the driver), without asking the library or Redis. Pure functions, unit-tested on synthetic
// logs in checker_test.cpp.
//
// Times are CLOCK_MONOTONIC nanoseconds (std::chrono::steady_clock), which every process on the
// machine shares.

#include <cstdint>
#include <string>
#include <vector>

namespace fairsem::stress {

enum class Mode : std::uint8_t { acquire = 0, try_acquire = 1, try_acquire_for = 2 };

/// One critical section as the checker sees it.
struct Section {
  std::int64_t token = 0;
  std::int64_t slot = 0;      // Permit::slot()
  std::int64_t wait_ns = 0;   // the acquire call started
  std::int64_t enter_ns = 0;  // the acquire call returned a permit
  std::int64_t leave_ns = 0;  // the section ended (only when `left`)
  /// Permit::deadline() when the section ended (or began, if it never ended).
  std::int64_t deadline_ns = 0;
  int pid = 0;
  Mode mode = Mode::acquire;
  bool left = false;  // false: its process died inside (SIGKILL)
  bool lost = false;  // Permit::lost() when it ended
};

/// A worker process SIGKILLed at `at_ns`.
struct Kill {
  int pid = 0;
  std::int64_t at_ns = 0;
};

/// A worker process SIGSTOPped from `stop_ns` until SIGCONT at `cont_ns`.
struct Stop {
  int pid = 0;
  std::int64_t stop_ns = 0;
  std::int64_t cont_ns = 0;
};

/// A time window in which some fault could delay a client's view of its grant (network faults,
/// Redis restarts): grant-order checks leave out the grants whose wait overlaps one.
struct Window {
  std::int64_t from_ns = 0;
  std::int64_t to_ns = 0;
  /// The processes it reaches (e.g. those connected through the faulty proxy); empty: all.
  std::vector<int> pids;
};

struct CheckInput {
  std::vector<Section> sections;
  std::vector<Kill> kills;
  std::vector<Stop> stops;
  std::vector<Window> disturbances;
  long long limit = 1;
  std::int64_t lease_ns = 0;
  /// How much later than a higher ticket a lower ticket may enter before it counts as an order
  /// violation: the time between a grant in Redis and its client noticing is not observable.
  std::int64_t order_slack_ns = 0;
};

struct CheckResult {
  std::size_t grants = 0;
  /// The most sections at one instant whose permit was still valid (see check()).
  long long max_holders = 0;
  std::int64_t max_holders_at_ns = 0;
  std::size_t duplicate_tokens = 0;
  /// Sections whose permit was valid while another valid one had the same slot, or whose slot
  /// was outside 0 .. limit-1, or whose token was not above the slot's previous holder's.
  std::size_t shared_slots = 0;
  std::size_t slots_out_of_range = 0;
  std::size_t slot_tokens_not_increasing = 0;
  /// Blocking grants (acquire, try_acquire_for) entered out of ticket order.
  std::size_t fifo_violations = 0;
  std::size_t fifo_checked = 0;  // blocking grants that no fault disturbed
  /// Any grants entered out of token order.
  std::size_t token_order_violations = 0;
  std::size_t token_order_checked = 0;
  /// The largest amount by which a lower token entered after a higher one (ns), among the
  /// grants checked: how close the order checks came to their slack.
  std::int64_t worst_inversion_ns = 0;
  std::size_t inversions_over_10ms = 0;  // among all grants checked, violations or not
  /// Holders frozen (SIGSTOP) for longer than a lease while inside.
  std::size_t stopped_holders = 0;
  std::size_t stopped_holders_not_lost = 0;         // did not see Permit::lost() on waking
  std::size_t stopped_holders_passed_on = 0;        // someone entered while they were frozen
  std::size_t stopped_holders_token_not_older = 0;  // ...with a token not above theirs
  std::vector<std::string> failures;  // one line per broken promise; empty when all hold

  bool ok() const noexcept { return failures.empty(); }
};

/// Checks:
/// - at no instant more than `limit` holders whose permit was valid. A section counts from
///   enter to leave; if its permit was lost by then, only until its deadline; if its process
///   was killed inside, until the kill.
/// - no token granted twice;
/// - every slot in 0 .. limit-1, no two sections valid at once with the same slot, and for
///   each slot, tokens increasing from holder to holder (in the order they entered);
/// - blocking grants in ticket order, and all grants in token order (a grant that enters
///   later than a higher token by more than the slack is a violation), leaving out grants whose
///   wait overlaps a disturbance or a SIGSTOP of their own process;
/// - a holder frozen for longer than a lease saw lost() when it woke, and every section that
///   began waiting after it entered and was granted while it was frozen carries a higher token.
CheckResult check(const CheckInput& in);

}  // namespace fairsem::stress
