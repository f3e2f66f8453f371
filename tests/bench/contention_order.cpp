#include "contention_order.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace fairsem::bench::contention {
namespace {

/// Whether every request among the first `earlier` of `by_ask` that still waited more than
/// `grant_tolerance` after `r` entered drew a later ticket than `r`. Each waited at most
/// `longest_wait`, so only those that asked after r.enter_ns - longest_wait need a look.
bool went_ahead_of_later_tickets(const Record& r, const Record* const* by_ask, std::size_t earlier,
                                 std::int64_t longest_wait, std::int64_t grant_tolerance) {
  for (std::size_t i = earlier; i-- > 0;) {
    const Record& e = *by_ask[i];
    if (e.ask_ns <= r.enter_ns - longest_wait) break;
    if (e.waited_until() - r.enter_ns > grant_tolerance && !(e.granted() && e.token > r.token)) {
      return false;
    }
  }
  return true;
}

}  // namespace

FifoOrder fifo_order(const Settings& s, const std::vector<Record>& all) {
  std::vector<const Record*> by_ask;
  by_ask.reserve(all.size());
  for (const Record& r : all) by_ask.push_back(&r);
  std::sort(by_ask.begin(), by_ask.end(),
            [](const Record* a, const Record* b) { return a->ask_ns < b->ask_ns; });
  const auto tolerance = static_cast<std::int64_t>(s.fifo_tolerance_us * 1e3);
  const auto grant_tolerance = static_cast<std::int64_t>(s.fifo_grant_tolerance_us * 1e3);
  FifoOrder f;
  // Of the requests that asked more than the tolerance before the one at hand: the latest
  // moment one of them still waited, overall and by units.
  std::int64_t waited = std::numeric_limits<std::int64_t>::min();
  std::map<long long, std::int64_t> waited_by_units;
  const bool tickets = std::all_of(all.begin(), all.end(),
                                   [](const Record& r) { return !r.granted() || r.token >= 0; });
  std::int64_t longest_wait = 0;
  for (const Record& r : all) longest_wait = std::max(longest_wait, r.waited_until() - r.ask_ns);
  if (tickets) f.queued_later = 0;
  std::size_t earlier = 0;
  for (const Record* r : by_ask) {
    for (; earlier < by_ask.size() && by_ask[earlier]->ask_ns < r->ask_ns - tolerance; ++earlier) {
      const Record& e = *by_ask[earlier];
      waited = std::max(waited, e.waited_until());
      auto [it, fresh] = waited_by_units.emplace(e.units, e.waited_until());
      if (!fresh) it->second = std::max(it->second, e.waited_until());
    }
    if (!r->granted() || waited <= r->enter_ns) continue;
    ++f.strict;
    f.margins.push_back(static_cast<double>(waited - r->enter_ns) / 1e3);
    if (waited - r->enter_ns <= grant_tolerance) continue;
    ++f.out_of_order;
    for (const auto& [units, until] : waited_by_units) {
      if (until - r->enter_ns > grant_tolerance) ++f.overtaken[units];
    }
    if (tickets &&
        went_ahead_of_later_tickets(*r, by_ask.data(), earlier, longest_wait, grant_tolerance)) {
      ++f.queued_later;
    }
  }
  return f;
}

SlotChecks slot_checks(std::vector<Record> granted) {
  SlotChecks c;
  const bool recorded =
      !granted.empty() && std::all_of(granted.begin(), granted.end(),
                                      [](auto& r) { return r.token >= 0 && r.slots_kept > 0; });
  if (!recorded) return c;
  std::sort(granted.begin(), granted.end(),
            [](const Record& a, const Record& b) { return a.token < b.token; });
  c.early_handovers = 0;
  c.proven_out_of_order = 0;
  std::map<std::int32_t, const Record*> previous;  // by slot: its holder with the latest ticket
  std::vector<std::int64_t> freed(granted.size(), std::numeric_limits<std::int64_t>::min());
  for (std::size_t i = 0; i < granted.size(); ++i) {
    const Record& g = granted[i];
    for (std::int32_t k = 0; k < g.slots_kept; ++k) {
      const Record*& before = previous[g.slots[static_cast<std::size_t>(k)]];
      if (before != nullptr) {
        if (g.enter_ns < before->release_ns) ++c.early_handovers;
        freed[i] = std::max(freed[i], before->release_ns);
      }
      before = &g;
    }
  }
  std::int64_t first_later_enter = std::numeric_limits<std::int64_t>::max();
  for (std::size_t i = granted.size(); i-- > 0;) {
    if (first_later_enter < freed[i]) ++c.proven_out_of_order;
    first_later_enter = std::min(first_later_enter, granted[i].enter_ns);
  }
  return c;
}

}  // namespace fairsem::bench::contention
