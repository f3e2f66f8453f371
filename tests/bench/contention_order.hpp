#pragma once

// Was the semaphore fair? The order checks of fairsem_contention over the recorded requests:
// FIFO order by the clients' clocks (with tolerances for their noise), by tickets, and by the
// permits' slots, which need no tolerance at all.

#include <map>
#include <vector>

#include "contention_record.hpp"
#include "contention_settings.hpp"

namespace fairsem::bench::contention {

struct FifoOrder {
  long long out_of_order = 0;
  long long queued_later = -1;  // -1: no tickets to tell
  long long strict = 0;
  std::vector<double> margins;
  std::map<long long, long long> overtaken;  // by the units of the request that was overtaken
};

/// FIFO, strict and units-aware: a request is granted only after every request queued before
/// it, whatever the units (a later small request that would fit in the free units still may
/// not overtake an earlier large one). A grant is out of order when, at the moment it was
/// granted, a request that asked more than fifo_tolerance_us before it was still waiting:
/// granted more than fifo_grant_tolerance_us after it, or never (it gave up at the end). The
/// ask tolerance covers the way from ask_ns to Redis; the grant tolerance the way from a grant
/// in Redis to the client's enter_ns, its wake-up, which matters when one release promotes
/// several waiters at once (limit > 1): they wake in any order. fifo_violations_strict counts
/// with no grant tolerance, and fifo_violation_margin_us says by how much each of those grants
/// went ahead (how long the earlier request still waited after it).
///
/// With tickets (fairsem's fencing tokens, drawn by Redis when a request joins the queue),
/// fifo_violations_queued_later counts the out-of-order grants where every request the grant
/// went ahead of had drawn a later ticket: their acquire() calls started first on the clients'
/// clocks but reached Redis after the grant's, so Redis queued them behind it.
FifoOrder fifo_order(const Settings& s, const std::vector<Record>& all);

struct SlotChecks {
  long long early_handovers = -1;  // -1: no slots or tickets recorded
  long long proven_out_of_order = -1;
};

/// Checks that need no tolerance, for an implementation that records tickets and slots
/// (fairsem's weighted runs). A permit's slots were each given back by their previous holder
/// (the one with the highest lower ticket), so it cannot have been granted before the latest of
/// those holders' release() calls began; and its holder entered after its grant. So
/// - a holder that entered before its slot's previous holder called release() proves a slot
///   held twice (early_handovers), and
/// - a grant with a higher ticket that entered before that moment proves a grant out of ticket
///   order (proven_out_of_order): the later ticket was granted while the earlier one was
///   still waiting, whatever the clocks' noise.
/// Zero of each is consistent with strict FIFO, not a proof of it.
SlotChecks slot_checks(std::vector<Record> granted);

}  // namespace fairsem::bench::contention
