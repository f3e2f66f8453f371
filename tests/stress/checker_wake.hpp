#pragma once

// Free before granted: for each blocking grant, how long the units it got had been free, with
// nobody ahead of it, before its client had the permit. Outside faults that is the time a
// promotion's wake-up takes to reach its waiter, which must be well under a poll interval: a
// wake-up lost (or handed to the wrong waiter) shows as a grant a poll late.
//
// From the log alone, counted in units and erring towards a shorter delay: a permit's units
// count as held from its client's enter until its release call returned (or, without one, its
// lease ran out: the deadline last seen, or a lease after its process was killed); a waiter with
// a lower token counts as ahead from the start of its call until its enter, and a timed-out,
// cancelled or failed request that began before this one (within the order slack) until it
// ended (a cancel's leave follows its callback: the slack after; a failed one's entry may stay
// a lease). The grant's units were free from the last instant since its own call began after
// which, throughout, limit - held - ahead covered its units; the delay runs from there to its
// enter less its process's wait for a CPU (record::judged_enter).

#include <cstdint>
#include <vector>

#include "checker.hpp"

namespace fairsem::stress {

/// One blocking grant's delay.
struct WakeDelay {
  const Section* section = nullptr;
  std::int64_t free_from_ns = 0;  // its units free from then on (as above)
  std::int64_t delay_ns = 0;      // enter - free_from
  bool in_fault = false;          // [free_from, enter] meets a fault window
};

/// A fault window: from a fault's start until its recovery plus a lease. The driver's
/// fault_windows say start and recovery; a kill recovers at once, a stop at its SIGCONT.
std::vector<Window> fault_windows(const CheckInput& in);

/// Every blocking grant of this release's clients (a try never waits), in log order.
std::vector<WakeDelay> wake_delays(const CheckInput& in);

/// Fills the wake-up figures of `out`, and fails when a grant outside fault windows came more
/// than in.wake_bound_ns after its units were free (when that bound is set).
void check_wake_ups(const CheckInput& in, CheckResult& out);

}  // namespace fairsem::stress
