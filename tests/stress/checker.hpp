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

/// How a request was made. Every kind but try_acquire queues, and is held to FIFO order.
enum class Mode : std::uint8_t {
  acquire = 0,
  try_acquire = 1,
  try_acquire_for = 2,
  acquire_async = 3,          // the future of acquire_async(n)
  try_acquire_for_async = 4,  // the future of try_acquire_for_async(n, timeout)
  callback = 5,               // acquire_async_until(n, deadline, callback), sometimes cancelled
};

/// One critical section as the checker sees it.
struct Section {
  std::int64_t token = 0;
  /// The units asked for (acquire(n)); a permit of n units holds n distinct slots.
  long long units = 1;
  /// Permit::slots() when granted: `units` distinct slots, ascending.
  std::vector<std::int64_t> slots;
  std::int64_t wait_ns = 0;   // the acquire call started
  std::int64_t enter_ns = 0;  // the acquire call returned a permit
  std::int64_t leave_ns = 0;  // the section ended (only when `left`)
  /// Permit::deadline() when the section ended (if it never ended: when it was last looked at,
  /// at the enter or around a partial release).
  std::int64_t deadline_ns = 0;
  /// Permit::deadline() at the enter (0: not recorded): a lease after the call that granted it
  /// was sent (with min_replicas, the call whose reply said granted; else maybe the last call
  /// before a wake-up granted it).
  std::int64_t granted_deadline_ns = 0;
  /// The longest the asking thread or one of the library's in its process (the waker, the
  /// executor's) waited for a CPU from its call until its enter (-1: unknown): what a loaded
  /// machine added to a late enter.
  std::int64_t cpu_wait_ns = -1;
  /// A partial release (Permit::release(k), 0 < k < units) in the middle of the section: when
  /// its holder stopped using the units it gave back (just before the call; 0: none), and
  /// Permit::slots() after it, which must be the lowest units - k of `slots`. From then on the
  /// section holds only `kept`; the others may pass on.
  std::int64_t partial_ns = 0;
  std::vector<std::int64_t> kept;
  bool partial_failed = false;  // release(k) threw: `kept` is what the worker meant to keep
  int pid = 0;
  Mode mode = Mode::acquire;
  bool left = false;  // false: its process died inside (SIGKILL)
  bool lost = false;  // Permit::lost() when it ended
  /// When its release call returned, having released (0: unknown: it failed, or the process
  /// died first), and when its partial release's did (0: likewise): Redis had the units free
  /// by then.
  std::int64_t release_ns = 0;
  std::int64_t partial_done_ns = 0;
  bool previous = false;  // made by a client of the previous release
  /// The tenant its request named (0: none). FIFO holds within each tenant (checker_tenants.hpp).
  int tenant = 0;
};

/// A try_acquire_for that gave up at its deadline without a permit. It was queued from soon
/// after `wait_ns` until at least `deadline_ns` (the call started at `wait_ns` with that
/// timeout), so nobody who asked later may be granted in between.
struct Timeout {
  long long units = 1;
  std::int64_t wait_ns = 0;
  std::int64_t deadline_ns = 0;  // wait_ns + the timeout
  std::int64_t end_ns = 0;       // the call returned
  int pid = 0;
  int tenant = 0;  // only the same tenant's requests may not pass it
};

/// A request that left the queue without a permit or a time-out: cancelled (its leave follows
/// its callback), or ended by an error (its entry may stay a lease). Queued from `wait_ns`.
struct Withdrawal {
  long long units = 1;
  std::int64_t wait_ns = 0;
  std::int64_t end_ns = 0;
  int pid = 0;
  bool error = false;
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
  std::vector<Timeout> timeouts;
  std::vector<Kill> kills;
  std::vector<Stop> stops;
  std::vector<Window> disturbances;
  std::vector<Withdrawal> withdrawals;
  /// Every fault injected, each from its start until its recovery plus a lease (the wake-up
  /// bound judges only grants whose units were free outside all of them).
  std::vector<Window> fault_windows;
  /// The longest a grant may come after its units were free, outside fault windows (0: not
  /// checked). See check_wake_ups (checker_wake.hpp).
  std::int64_t wake_bound_ns = 0;
  /// In units: the sum of the units of the valid permits may never exceed it.
  long long limit = 1;
  std::int64_t lease_ns = 0;
  /// How much later than a higher ticket a lower ticket may enter before it counts as an order
  /// violation: the time between a grant in Redis and its client noticing is not observable.
  /// For a timed-out waiter, also how long after its call it may have taken to join the queue.
  std::int64_t order_slack_ns = 0;
  /// How long after its SIGCONT a frozen process may still be slow to hear of its grants (its
  /// waker's BRPOP may have failed during the freeze and pause before listening again): the
  /// order checks leave out its grants whose wait overlaps the freeze or this time after it.
  std::int64_t thaw_recovery_ns = 0;
  /// Requests named tenants (--tenants): tokens are then given at the grant, not in the queue,
  /// and FIFO within each tenant is also checked against when requests began waiting
  /// (check_queue_order, checker_tenants.hpp).
  bool tenants = false;
};

struct CheckResult {
  std::size_t grants = 0;
  std::size_t partial_releases = 0;
  std::size_t partial_releases_failed = 0;  // release(k) threw
  /// The most units held at one instant by permits that were still valid (see check()), when
  /// that was, and how many permits held them.
  long long max_units = 0;
  std::int64_t max_units_at_ns = 0;
  long long max_units_holders = 0;
  /// How many times the units held by valid permits rose above the limit.
  std::size_t over_limit_instants = 0;
  /// The most valid permits at one instant, whatever their units.
  long long max_holders = 0;
  std::size_t duplicate_tokens = 0;
  /// Per slot: holdings valid while another valid permit had the same slot, slots outside
  /// 0 .. limit-1, and holders whose token was not above the slot's previous holder's.
  std::size_t shared_slots = 0;
  std::size_t slots_out_of_range = 0;
  std::size_t slot_tokens_not_increasing = 0;
  std::size_t slot_holdings = 0;  // (permit, slot) pairs
  /// Permits whose slots were not `units` distinct slots in ascending order.
  std::size_t bad_slot_sets = 0;
  /// Partial releases that kept other slots than the lowest (gave back not the highest).
  std::size_t partial_wrong_slots = 0;
  /// Blocking grants (acquire, try_acquire_for) entered out of ticket order, among the grants
  /// of one tenant (all of them when none is named).
  std::size_t fifo_violations = 0;
  std::size_t fifo_checked = 0;  // blocking grants that no fault disturbed
  /// Any grants entered out of token order.
  std::size_t token_order_violations = 0;
  std::size_t token_order_checked = 0;
  /// The largest amount by which a lower token entered after a higher one (ns), among the
  /// grants checked: how close the order checks came to their slack.
  std::int64_t worst_inversion_ns = 0;
  std::size_t inversions_over_10ms = 0;  // among all grants checked, violations or not
  /// Blocking FIFO violations in which the overtaken request asked for more units than the one
  /// that overtook it (strict FIFO: a small request never slips past a big one).
  std::size_t fifo_violations_past_heavier = 0;
  /// Timed-out waiters that someone who asked later was granted before (beyond the slack),
  /// and how many timed-out waiters were checked (those no fault disturbed).
  std::size_t timeouts_overtaken = 0;
  std::size_t timeouts_checked = 0;
  /// With tenants: blocking grants of a tenant granted before (a lower token than) a blocking
  /// request of the same tenant that began waiting before them by more than the slack
  /// (check_queue_order), and how many were checked.
  std::size_t queue_order_violations = 0;
  std::size_t queue_order_checked = 0;
  /// Holders frozen (SIGSTOP) for longer than a lease while inside.
  std::size_t stopped_holders = 0;
  std::size_t stopped_holders_not_lost = 0;         // did not see Permit::lost() on waking
  std::size_t stopped_holders_passed_on = 0;        // someone entered while they were frozen
  std::size_t stopped_holders_token_not_older = 0;  // ...with a token not above theirs
  /// Free before granted (checker_wake.hpp): blocking grants judged, the worst and the 99th
  /// percentile delay of those outside fault windows and of those inside, and how many outside
  /// exceeded the bound.
  std::size_t wake_ups_out = 0;
  std::size_t wake_ups_in = 0;
  std::int64_t wake_worst_out_ns = 0;
  std::int64_t wake_p99_out_ns = 0;
  std::int64_t wake_worst_in_ns = 0;
  std::int64_t wake_p99_in_ns = 0;
  std::size_t wake_ups_late = 0;
  /// Of the blocking grants no disturbance reached and whose deadline at the enter is known,
  /// the most of its lease a permit had used up when its client entered (enter - (that
  /// deadline - lease): with min_replicas, the time from sending the call that granted it to the
  /// enter), and the 99th percentile: a call that took long shows here, a late wake-up does not.
  std::int64_t lease_used_worst_ns = 0;
  std::int64_t lease_used_p99_ns = 0;
  std::int64_t lease_used_worst_token = 0;
  std::int64_t lease_used_worst_cpu_wait_ns = -1;  // that grant's Section::cpu_wait_ns
  std::vector<std::string> failures;  // one line per broken promise; empty when all hold
  /// What the first of some broken promises looked like (the sections involved, the faults
  /// around them), to tell a broken library from a broken harness. Times in ms since the first
  /// request.
  std::vector<std::string> details;

  bool ok() const noexcept { return failures.empty(); }
};

/// Checks, in units (a permit of n units counts n, and n - k after a partial release of k):
/// - at no instant more than `limit` units held by permits that were valid. A section counts
///   from enter to leave (the units it gave back, only until its partial release); if its
///   permit was lost by then, only until its deadline; if its process was killed inside, until
///   the kill or the deadline last seen, whichever came first;
/// - no token granted twice;
/// - every permit of n units holds n distinct slots, each in 0 .. limit-1; a partial release
///   keeps the lowest slots (gives back the highest); no slot held by two valid permits at
///   once, and for each slot, tokens increasing from holder to holder (in the order they
///   entered);
/// - strict FIFO whatever the units, within each tenant: blocking grants in ticket order (with
///   tenants, also in the order they began waiting, check_queue_order), and all grants in token
///   order (a grant that enters later than a higher token by more than the slack is a
///   violation; enters judged less the process's wait for a CPU, record::judged_enter), leaving out
///   grants whose wait overlaps a disturbance or a SIGSTOP of their own process; and nobody who
///   began waiting more than the slack after a timed-out waiter was granted before that waiter's
///   deadline (a waiter that never got a permit, e.g. a big one that small ones kept passing,
///   leaves no grant to compare tokens with);
/// - a holder frozen for longer than a lease saw lost() when it woke, and every section that
///   began waiting after it entered and was granted while it was frozen carries a higher token;
/// - with a wake-up bound, every blocking grant whose units were free outside fault windows
///   came within the bound of their being free (check_wake_ups, checker_wake.hpp).
CheckResult check(const CheckInput& in);

}  // namespace fairsem::stress
