#include "checker.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

namespace fairsem::stress {
namespace {

constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

bool overlaps(std::int64_t from, std::int64_t to, std::int64_t w_from, std::int64_t w_to) {
  return from <= w_to && w_from <= to;
}

/// When the section's permit stopped counting as held by it; kNever if unknown.
std::int64_t valid_until(const Section& s, const std::multimap<int, std::int64_t>& kills) {
  if (s.left) return s.lost ? std::min(s.leave_ns, s.deadline_ns) : s.leave_ns;
  const auto [first, last] = kills.equal_range(s.pid);
  std::int64_t end = kNever;
  for (auto it = first; it != last; ++it) {
    if (it->second >= s.enter_ns) end = std::min(end, it->second);
  }
  return end;
}

void check_holders(const CheckInput& in, CheckResult& out) {
  std::multimap<int, std::int64_t> kills;
  for (const Kill& k : in.kills) kills.emplace(k.pid, k.at_ns);
  std::vector<std::pair<std::int64_t, int>> events;  // (time, +1 enter / -1 end)
  events.reserve(in.sections.size() * 2);
  std::size_t unended = 0;
  for (const Section& s : in.sections) {
    const std::int64_t end = valid_until(s, kills);
    if (end == kNever) ++unended;
    if (end <= s.enter_ns) continue;  // its permit was no longer valid when it entered
    events.emplace_back(s.enter_ns, +1);
    events.emplace_back(end, -1);
  }
  // At equal times an end comes before an enter: a permit handed on in the same nanosecond.
  std::sort(events.begin(), events.end());
  long long holders = 0;
  for (const auto& [t, delta] : events) {
    holders += delta;
    if (holders > out.max_holders) {
      out.max_holders = holders;
      out.max_holders_at_ns = t;
    }
  }
  if (out.max_holders > in.limit) {
    out.failures.push_back(fmt::format("{} holders with a valid permit at once (limit {})",
                                       out.max_holders, in.limit));
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
    if (st.pid == s.pid && overlaps(s.wait_ns, s.enter_ns, st.stop_ns, st.cont_ns)) return true;
  }
  return false;
}

void check_slots(const CheckInput& in, CheckResult& out) {
  std::multimap<int, std::int64_t> kills;
  for (const Kill& k : in.kills) kills.emplace(k.pid, k.at_ns);
  std::map<std::int64_t, std::vector<const Section*>> by_slot;
  for (const Section& s : in.sections) {
    if (s.slot < 0 || s.slot >= in.limit) {
      ++out.slots_out_of_range;
    } else {
      by_slot[s.slot].push_back(&s);
    }
  }
  for (auto& [slot, sections] : by_slot) {
    std::sort(sections.begin(), sections.end(),
              [](const Section* a, const Section* b) { return a->enter_ns < b->enter_ns; });
    std::int64_t valid_to = std::numeric_limits<std::int64_t>::min();
    std::int64_t last_token = std::numeric_limits<std::int64_t>::min();
    for (const Section* section : sections) {
      const Section& s = *section;
      const std::int64_t end = valid_until(s, kills);
      if (end <= s.enter_ns) continue;  // no longer valid when it entered
      if (s.enter_ns < valid_to) ++out.shared_slots;
      valid_to = std::max(valid_to, end);
      // As for the order checks, a grant a fault may have shown its client late is left out.
      if (disturbed(s, in)) continue;
      if (s.token <= last_token) ++out.slot_tokens_not_increasing;
      last_token = s.token;
    }
  }
  if (out.slots_out_of_range > 0) {
    out.failures.push_back(fmt::format("{} permits with a slot outside 0 .. {}",
                                       out.slots_out_of_range, in.limit - 1));
  }
  if (out.shared_slots > 0) {
    out.failures.push_back(fmt::format("{} permits valid while another valid permit had their slot",
                                       out.shared_slots));
  }
  if (out.slot_tokens_not_increasing > 0) {
    out.failures.push_back(
        fmt::format("{} permits whose token was not above their slot's previous "
                    "holder's",
                    out.slot_tokens_not_increasing));
  }
}

/// Counts the sections that entered before a lower token by more than the slack.
std::size_t count_order_violations(std::vector<const Section*> sections, std::int64_t slack,
                                   std::int64_t& worst, std::size_t* over_10ms = nullptr) {
  std::sort(sections.begin(), sections.end(),
            [](const Section* a, const Section* b) { return a->token < b->token; });
  std::size_t violations = 0;
  std::int64_t latest_lower = std::numeric_limits<std::int64_t>::min();
  for (const Section* s : sections) {
    if (latest_lower != std::numeric_limits<std::int64_t>::min()) {
      const std::int64_t inversion = latest_lower - s->enter_ns;
      worst = std::max(worst, inversion);
      if (inversion > slack) ++violations;
      if (over_10ms != nullptr && inversion > 10'000'000) ++*over_10ms;
    }
    latest_lower = std::max(latest_lower, s->enter_ns);
  }
  return violations;
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
  out.token_order_checked = all.size();
  std::int64_t worst = 0;
  out.fifo_violations = count_order_violations(blocking, in.order_slack_ns, worst);
  out.token_order_violations =
      count_order_violations(all, in.order_slack_ns, worst, &out.inversions_over_10ms);
  out.worst_inversion_ns = worst;
  if (out.fifo_violations > 0) {
    out.failures.push_back(
        fmt::format("{} blocking waiters granted out of ticket order (slack {} ms)",
                    out.fifo_violations, in.order_slack_ns / 1'000'000));
  }
  if (out.token_order_violations > 0) {
    out.failures.push_back(fmt::format("{} grants entered out of token order (slack {} ms)",
                                       out.token_order_violations, in.order_slack_ns / 1'000'000));
  }
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
  return out;
}

}  // namespace fairsem::stress
