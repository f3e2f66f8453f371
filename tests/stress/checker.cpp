#include "checker.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include "checker_record.hpp"
#include "checker_tenants.hpp"
#include "checker_wake.hpp"

namespace fairsem::stress {
namespace {

using record::describe;
using record::describe_faults;
using record::describe_meanwhile;
using record::given_back;
using record::kills_by_pid;
using record::KillTimes;
using record::kNever;
using record::ms_since;
using record::origin;
using record::overlaps;
using record::partial_until;
using record::valid_until;

/// Every section valid at `at`, and the faults around them.
void describe_over_limit(const CheckInput& in, const KillTimes& kills, std::int64_t at,
                         std::vector<std::string>& out) {
  const std::int64_t t0 = origin(in);
  out.push_back(fmt::format("first time over the limit: {}; valid then:", ms_since(at, t0)));
  std::int64_t from = at;
  std::int64_t to = at;
  for (const Section& s : in.sections) {
    const std::int64_t end = valid_until(s, kills);
    if (s.enter_ns <= at && at < end) {
      out.push_back("  " + describe(s, end, t0));
      from = std::min(from, s.wait_ns);
      to = std::max(to, std::min(end, s.left ? s.leave_ns : end));
    }
  }
  describe_faults(in, from, to, t0, out);
}

void check_holders(const CheckInput& in, CheckResult& out) {
  const KillTimes kills = kills_by_pid(in);
  struct Event {
    std::int64_t at;
    int order;  // 0: units given back, 1: units taken: at equal times ends come first
    long long units;
    int holders;
  };
  std::vector<Event> events;
  events.reserve(in.sections.size() * 3);
  std::size_t unended = 0;
  for (const Section& s : in.sections) {
    const std::int64_t end = valid_until(s, kills);
    if (end == kNever) ++unended;
    if (end <= s.enter_ns) continue;  // its permit was no longer valid when it entered
    const long long back = given_back(s);
    events.push_back({s.enter_ns, 1, s.units, 1});
    if (back > 0) events.push_back({partial_until(s, end), 0, -back, 0});
    events.push_back({end, 0, -(s.units - back), -1});
  }
  // A permit handed on in the same nanosecond is not two at once.
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.at != b.at ? a.at < b.at : a.order < b.order;
  });
  long long units = 0;
  long long holders = 0;
  bool over = false;
  std::int64_t first_over = 0;
  for (const Event& e : events) {
    units += e.units;
    holders += e.holders;
    out.max_holders = std::max(out.max_holders, holders);
    if (units > out.max_units) {
      out.max_units = units;
      out.max_units_at_ns = e.at;
      out.max_units_holders = holders;
    }
    if (units > in.limit && !over) {
      if (out.over_limit_instants == 0) first_over = e.at;
      ++out.over_limit_instants;
    }
    over = units > in.limit;
  }
  if (out.over_limit_instants > 0) {
    describe_over_limit(in, kills, first_over, out.details);
    out.failures.push_back(fmt::format(
        "{} units held by valid permits at once (limit {}; {} permits; over the limit {} times)",
        out.max_units, in.limit, out.max_units_holders, out.over_limit_instants));
  }
  if (unended > 0) {
    out.failures.push_back(fmt::format(
        "{} critical sections never ended although their process was not killed", unended));
  }
}

void check_duplicates(const CheckInput& in, CheckResult& out) {
  std::vector<std::int64_t> tokens;
  tokens.reserve(in.sections.size());
  for (const Section& s : in.sections) tokens.push_back(s.token);
  std::sort(tokens.begin(), tokens.end());
  for (std::size_t i = 1; i < tokens.size(); ++i) {
    if (tokens[i] == tokens[i - 1]) ++out.duplicate_tokens;
  }
  if (out.duplicate_tokens > 0) {
    out.failures.push_back(fmt::format("{} fencing tokens granted twice", out.duplicate_tokens));
  }
}

bool disturbed(const Section& s, const CheckInput& in) {
  for (const Window& w : in.disturbances) {
    if (!w.pids.empty() && std::find(w.pids.begin(), w.pids.end(), s.pid) == w.pids.end()) {
      continue;
    }
    if (overlaps(s.wait_ns, s.enter_ns, w.from_ns, w.to_ns)) return true;
  }
  for (const Stop& st : in.stops) {
    if (st.pid == s.pid &&
        overlaps(s.wait_ns, s.enter_ns, st.stop_ns, st.cont_ns + in.thaw_recovery_ns)) {
      return true;
    }
  }
  return false;
}

/// Whether `slots` are `units` distinct slots in ascending order.
bool sound_slot_set(const Section& s) {
  if (static_cast<long long>(s.slots.size()) != s.units) return false;
  return std::adjacent_find(s.slots.begin(), s.slots.end(),
                            [](std::int64_t a, std::int64_t b) { return a >= b; }) == s.slots.end();
}

/// Whether a partial release kept the lowest slots, fewer than it had.
bool kept_the_lowest(const Section& s) {
  return s.kept.size() < s.slots.size() &&
         std::equal(s.kept.begin(), s.kept.end(), s.slots.begin());
}

/// Counts the permits whose slot sets, or partial releases, break the contract.
void check_slot_sets(const CheckInput& in, CheckResult& out) {
  for (const Section& s : in.sections) {
    if (!sound_slot_set(s)) ++out.bad_slot_sets;
    if (s.partial_ns == 0) continue;
    ++out.partial_releases;
    if (s.partial_failed) ++out.partial_releases_failed;
    if (!kept_the_lowest(s)) ++out.partial_wrong_slots;
  }
}

/// One section's holding of one slot: from its enter until its end, or its partial release if
/// the slot was one it gave back.
struct Holding {
  const Section* section;
  std::int64_t to;
};

/// Each slot's holdings; counts the slots out of range.
std::map<std::int64_t, std::vector<Holding>> holdings_by_slot(const CheckInput& in,
                                                              CheckResult& out) {
  const KillTimes kills = kills_by_pid(in);
  std::map<std::int64_t, std::vector<Holding>> by_slot;
  for (const Section& s : in.sections) {
    const std::int64_t end = valid_until(s, kills);
    for (const std::int64_t slot : s.slots) {
      if (slot < 0 || slot >= in.limit) {
        ++out.slots_out_of_range;
        continue;
      }
      const bool kept =
          s.partial_ns == 0 || std::find(s.kept.begin(), s.kept.end(), slot) != s.kept.end();
      by_slot[slot].push_back({&s, kept ? end : partial_until(s, end)});
      ++out.slot_holdings;
    }
  }
  return by_slot;
}

void describe_shared(const CheckInput& in, const Holding& first, const Holding& second,
                     std::vector<std::string>& out) {
  const std::int64_t t0 = origin(in);
  out.emplace_back("first slot held by two valid permits:");
  out.push_back(fmt::format("  {} (this slot until {})", describe(*first.section, first.to, t0),
                            ms_since(first.to, t0)));
  out.push_back(fmt::format("  {} (this slot until {})", describe(*second.section, second.to, t0),
                            ms_since(second.to, t0)));
  describe_faults(in, std::min(first.section->wait_ns, second.section->wait_ns),
                  std::max(first.to, second.to), t0, out);
}

/// One slot's holders, in the order they entered: never two valid at once, tokens increasing.
void check_slot_holders(std::vector<Holding>& holdings, const CheckInput& in, CheckResult& out) {
  std::sort(holdings.begin(), holdings.end(), [](const Holding& a, const Holding& b) {
    return a.section->enter_ns < b.section->enter_ns;
  });
  std::int64_t valid_to = std::numeric_limits<std::int64_t>::min();
  const Holding* longest = nullptr;  // the holding valid until valid_to
  std::int64_t last_token = std::numeric_limits<std::int64_t>::min();
  for (const Holding& h : holdings) {
    const Section& s = *h.section;
    if (h.to <= s.enter_ns) continue;  // no longer valid when it entered
    if (s.enter_ns < valid_to) {
      if (out.shared_slots == 0) describe_shared(in, *longest, h, out.details);
      ++out.shared_slots;
    }
    if (h.to > valid_to) {
      valid_to = h.to;
      longest = &h;
    }
    // As for the order checks, a grant a fault may have shown its client late is left out.
    if (disturbed(s, in)) continue;
    if (s.token <= last_token) ++out.slot_tokens_not_increasing;
    last_token = s.token;
  }
}

void check_slots(const CheckInput& in, CheckResult& out) {
  check_slot_sets(in, out);
  auto by_slot = holdings_by_slot(in, out);
  for (auto& entry : by_slot) check_slot_holders(entry.second, in, out);
  if (out.bad_slot_sets > 0) {
    out.failures.push_back(fmt::format(
        "{} permits whose slots were not as many distinct slots as units, in ascending order",
        out.bad_slot_sets));
  }
  if (out.partial_wrong_slots > 0) {
    out.failures.push_back(
        fmt::format("{} partial releases that did not keep the permit's lowest slots",
                    out.partial_wrong_slots));
  }
  if (out.slots_out_of_range > 0) {
    out.failures.push_back(
        fmt::format("{} slots of permits outside 0 .. {}", out.slots_out_of_range, in.limit - 1));
  }
  if (out.shared_slots > 0) {
    out.failures.push_back(fmt::format(
        "{} slot holdings valid while another valid permit had the slot", out.shared_slots));
  }
  if (out.slot_tokens_not_increasing > 0) {
    out.failures.push_back(
        fmt::format("{} slot holdings whose token was not above the slot's previous holder's",
                    out.slot_tokens_not_increasing));
  }
}

struct OrderCount {
  std::size_t violations = 0;
  std::size_t past_heavier = 0;  // violations that passed a request for more units
  /// The worst violation: the lower token that entered last, and the higher one it entered
  /// after.
  const Section* worst_lower = nullptr;
  const Section* worst_higher = nullptr;
};

/// Whether `s` entered more than the slack before a lower token that asked for more units
/// (`latest_lower_by_units`: the latest judged enter of the lower tokens, by units).
bool passed_heavier(const std::map<long long, std::int64_t>& latest_lower_by_units,
                    const Section& s, std::int64_t slack) {
  return std::any_of(latest_lower_by_units.upper_bound(s.units), latest_lower_by_units.end(),
                     [&](const auto& entry) { return entry.second - s.enter_ns > slack; });
}

/// Counts the sections that entered before a lower token by more than the slack, the lower
/// token's enter judged less its process's wait for a CPU (record::judged_enter; never the
/// earlier one's, which could only make an inversion of what was none).
OrderCount count_order_violations(std::vector<const Section*> sections, std::int64_t slack,
                                  std::int64_t& worst, std::size_t* over_10ms = nullptr) {
  std::sort(sections.begin(), sections.end(),
            [](const Section* a, const Section* b) { return a->token < b->token; });
  OrderCount count;
  const Section* latest_lower = nullptr;
  std::int64_t worst_violation = slack;
  std::map<long long, std::int64_t> latest_lower_by_units;
  for (const Section* s : sections) {
    if (latest_lower != nullptr) {
      const std::int64_t inversion = record::judged_enter(*latest_lower) - s->enter_ns;
      worst = std::max(worst, inversion);
      if (inversion > slack) {
        ++count.violations;
        if (inversion > worst_violation) {
          worst_violation = inversion;
          count.worst_lower = latest_lower;
          count.worst_higher = s;
        }
        if (passed_heavier(latest_lower_by_units, *s, slack)) ++count.past_heavier;
      }
      if (over_10ms != nullptr && inversion > 10'000'000) ++*over_10ms;
    }
    if (latest_lower == nullptr || record::judged_enter(*s) > record::judged_enter(*latest_lower)) {
      latest_lower = s;
    }
    auto [it, added] = latest_lower_by_units.emplace(s->units, record::judged_enter(*s));
    if (!added) it->second = std::max(it->second, record::judged_enter(*s));
  }
  return count;
}

void describe_order_violation(const CheckInput& in, const OrderCount& count,
                              std::vector<std::string>& out) {
  if (count.worst_lower == nullptr) return;
  const std::int64_t t0 = origin(in);
  const KillTimes kills = kills_by_pid(in);
  out.emplace_back("worst grant out of order: the lower token entered after the higher one");
  for (const Section* s : {count.worst_lower, count.worst_higher}) {
    out.push_back("  " + describe(*s, valid_until(*s, kills), t0));
  }
  const std::int64_t from = std::min(count.worst_lower->wait_ns, count.worst_higher->wait_ns);
  const std::int64_t to = count.worst_lower->enter_ns;
  // A holder killed up to a lease before can have passed its units on in the window too.
  describe_faults(in, from - in.lease_ns - 200'000'000, to, t0, out);
  // What gave units back meanwhile (whose leaving or partial release may have promoted the
  // lower token), and who else entered.
  describe_meanwhile(in, kills, from, to, {count.worst_lower, count.worst_higher}, t0, out);
}

bool disturbed(const Timeout& t, const CheckInput& in) {
  Section s;
  s.pid = t.pid;
  s.wait_ns = t.wait_ns;
  s.enter_ns = std::max(t.end_ns, t.deadline_ns);
  return disturbed(s, in);
}

/// Timed-out waiters that a later request of their tenant was granted before: one that began
/// waiting more than the slack after the waiter did (so the waiter was queued first) and entered
/// before the waiter's deadline (so the grant came while the waiter was still queued).
void check_timeouts(const CheckInput& in, CheckResult& out) {
  std::vector<const Section*> by_wait;
  by_wait.reserve(in.sections.size());
  for (const Section& s : in.sections) by_wait.push_back(&s);
  std::sort(by_wait.begin(), by_wait.end(),
            [](const Section* a, const Section* b) { return a->wait_ns < b->wait_ns; });
  for (const Timeout& t : in.timeouts) {
    const std::int64_t queued_by = t.wait_ns + in.order_slack_ns;
    if (queued_by >= t.deadline_ns || disturbed(t, in)) continue;
    ++out.timeouts_checked;
    auto it = std::upper_bound(by_wait.begin(), by_wait.end(), queued_by,
                               [](std::int64_t at, const Section* s) { return at < s->wait_ns; });
    for (; it != by_wait.end() && (*it)->wait_ns < t.deadline_ns; ++it) {
      if ((*it)->enter_ns < t.deadline_ns && (*it)->tenant == t.tenant) {
        if (out.timeouts_overtaken++ == 0) {
          record::describe_overtaken_timeout(in, t, **it, out.details);
        }
        break;
      }
    }
  }
  if (out.timeouts_overtaken > 0) {
    out.failures.push_back(fmt::format(
        "{} timed-out waiters passed by a later request while they were queued (slack {} ms)",
        out.timeouts_overtaken, in.order_slack_ns / 1'000'000));
  }
}

void check_order(const CheckInput& in, CheckResult& out) {
  std::vector<const Section*> all;
  std::vector<const Section*> blocking;
  for (const Section& s : in.sections) {
    if (disturbed(s, in)) continue;
    all.push_back(&s);
    if (s.mode != Mode::try_acquire) blocking.push_back(&s);
  }
  out.fifo_checked = blocking.size();
  record::count_lease_used(blocking, in.lease_ns, out);
  out.token_order_checked = all.size();
  std::int64_t worst = 0;
  for (const auto& group : by_tenant(blocking)) {  // FIFO holds within a tenant
    const OrderCount fifo = count_order_violations(group, in.order_slack_ns, worst);
    out.fifo_violations += fifo.violations;
    out.fifo_violations_past_heavier += fifo.past_heavier;
  }
  const OrderCount tokens =
      count_order_violations(all, in.order_slack_ns, worst, &out.inversions_over_10ms);
  out.token_order_violations = tokens.violations;
  describe_order_violation(in, tokens, out.details);
  out.worst_inversion_ns = worst;
  if (out.fifo_violations > 0) {
    out.failures.push_back(fmt::format(
        "{} blocking waiters granted out of ticket order (slack {} ms; {} of them "
        "passed a request for more units)",
        out.fifo_violations, in.order_slack_ns / 1'000'000, out.fifo_violations_past_heavier));
  }
  if (out.token_order_violations > 0) {
    out.failures.push_back(fmt::format("{} grants entered out of token order (slack {} ms)",
                                       out.token_order_violations, in.order_slack_ns / 1'000'000));
  }
  check_timeouts(in, out);
  check_queue_order(blocking, in, out);
}

void check_stopped_holders(const CheckInput& in, CheckResult& out) {
  for (const Stop& st : in.stops) {
    if (st.cont_ns - st.stop_ns <= in.lease_ns) continue;
    for (const Section& s : in.sections) {
      if (s.pid != st.pid || s.enter_ns >= st.stop_ns) continue;
      if (s.left && s.leave_ns <= st.cont_ns) continue;  // it had left before the freeze
      ++out.stopped_holders;
      if (s.left && !s.lost) ++out.stopped_holders_not_lost;
      bool passed_on = false;
      for (const Section& other : in.sections) {
        // Those who asked after it held its permit and got one while it was frozen. (A grant
        // made before its own can be noticed during the freeze too; it proves nothing.)
        if (other.pid == s.pid || other.wait_ns <= s.enter_ns || other.enter_ns <= st.stop_ns ||
            other.enter_ns >= st.cont_ns) {
          continue;
        }
        passed_on = true;
        if (other.token <= s.token) ++out.stopped_holders_token_not_older;
      }
      if (passed_on) ++out.stopped_holders_passed_on;
    }
  }
  if (out.stopped_holders_not_lost > 0) {
    out.failures.push_back(
        fmt::format("{} holders frozen for longer than a lease did not see lost() on waking",
                    out.stopped_holders_not_lost));
  }
  if (out.stopped_holders_token_not_older > 0) {
    out.failures.push_back(
        fmt::format("{} grants made while a holder was frozen carry a token not above its own",
                    out.stopped_holders_token_not_older));
  }
}

}  // namespace

CheckResult check(const CheckInput& in) {
  CheckResult out;
  out.grants = in.sections.size();
  check_holders(in, out);
  check_duplicates(in, out);
  check_slots(in, out);
  check_order(in, out);
  check_stopped_holders(in, out);
  check_wake_ups(in, out);
  return out;
}

}  // namespace fairsem::stress
