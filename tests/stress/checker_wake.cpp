#include "checker_wake.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "checker_record.hpp"

namespace fairsem::stress {
namespace {

using record::describe;
using record::describe_faults;
using record::describe_meanwhile;
using record::kills_by_pid;
using record::KillTimes;
using record::kNever;
using record::ms_since;
using record::origin;
using record::overlaps;
using record::valid_until;

/// A change of the units held, at an instant.
struct Change {
  std::int64_t at;
  long long units;  // + taken, - freed
};

/// When Redis had the section's units free at the latest, as its worker knows it.
std::int64_t freed_at(const Section& s, const KillTimes& kills, std::int64_t lease) {
  if (s.left) return s.release_ns != 0 ? s.release_ns : std::max(s.leave_ns, s.deadline_ns);
  const auto [first, last] = kills.equal_range(s.pid);
  std::int64_t end = kNever;
  for (auto it = first; it != last; ++it) {
    if (it->second >= s.enter_ns) end = std::min(end, it->second + lease);
  }
  return end;
}

/// The units held by every section over time, sorted, with `sums[i]` the units held just
/// before `changes[i]`.
struct Held {
  std::vector<Change> changes;
  std::vector<long long> sums;

  explicit Held(const CheckInput& in) {
    const KillTimes kills = kills_by_pid(in);
    for (const Section& s : in.sections) {
      const std::int64_t end = freed_at(s, kills, in.lease_ns);
      long long back = 0;
      if (s.partial_ns != 0 && !s.partial_failed && s.partial_done_ns != 0) {
        back = std::max(0LL, s.units - static_cast<long long>(s.kept.size()));
        if (back > 0) changes.push_back({std::min(s.partial_done_ns, end), -back});
      }
      changes.push_back({s.enter_ns, s.units});
      if (end != kNever) changes.push_back({end, -(s.units - back)});
    }
    std::sort(changes.begin(), changes.end(),
              [](const Change& a, const Change& b) { return a.at < b.at; });
    sums.reserve(changes.size() + 1);
    long long sum = 0;
    for (const Change& c : changes) {
      sums.push_back(sum);
      sum += c.units;
    }
    sums.push_back(sum);
  }
  /// Index of the first change at or after `t`.
  std::size_t first_at(std::int64_t t) const {
    return static_cast<std::size_t>(
        std::lower_bound(changes.begin(), changes.end(), t,
                         [](const Change& c, std::int64_t at) { return c.at < at; }) -
        changes.begin());
  }
};

/// A request ahead of the grant judged, waiting over [from, to).
struct Ahead {
  std::int64_t from;
  std::int64_t to;
  long long units;
};

/// Since when the units of `g` were free for it (see checker_wake.hpp).
std::int64_t free_from(const Section& g, const CheckInput& in, const Held& held,
                       const std::vector<const Section*>& by_wait, std::int64_t longest_wait) {
  const std::int64_t w = g.wait_ns;
  const std::int64_t e = g.enter_ns;
  if (e <= w) return e;
  std::vector<Ahead> ahead;
  auto it = std::lower_bound(by_wait.begin(), by_wait.end(), w - longest_wait,
                             [](const Section* s, std::int64_t at) { return s->wait_ns < at; });
  for (; it != by_wait.end() && (*it)->wait_ns < e; ++it) {
    const Section& l = **it;
    if (l.token < g.token && l.enter_ns > w) ahead.push_back({l.wait_ns, l.enter_ns, l.units});
  }
  const std::int64_t began_before = w + in.order_slack_ns;
  for (const Timeout& t : in.timeouts) {
    if (t.wait_ns < began_before && t.wait_ns < e && t.end_ns > w) {
      ahead.push_back({t.wait_ns, t.end_ns, t.units});
    }
  }
  for (const Withdrawal& x : in.withdrawals) {
    const std::int64_t to = x.end_ns + (x.error ? in.lease_ns : in.order_slack_ns);
    if (x.wait_ns < began_before && x.wait_ns < e && to > w) {
      ahead.push_back({x.wait_ns, to, x.units});
    }
  }
  // The margin just before the enter, then walked back change by change.
  const std::size_t at_enter = held.first_at(e);
  long long margin = in.limit - held.sums[at_enter] - g.units;
  std::vector<Change> changes;  // of the margin, within [w, e)
  for (std::size_t i = held.first_at(w); i < at_enter; ++i) {
    changes.push_back({held.changes[i].at, -held.changes[i].units});
  }
  for (const Ahead& a : ahead) {
    if (a.from < e && a.to >= e) margin -= a.units;
    if (a.from >= w && a.from < e) changes.push_back({a.from, -a.units});
    if (a.to >= w && a.to < e) changes.push_back({a.to, a.units});
  }
  if (margin < 0) return e;  // freed, as far as the log knows, only as it entered
  std::sort(changes.begin(), changes.end(),
            [](const Change& a, const Change& b) { return a.at > b.at; });
  for (std::size_t i = 0; i < changes.size();) {
    // Every change at one instant at once.
    const std::int64_t at = changes[i].at;
    long long before = margin;
    for (; i < changes.size() && changes[i].at == at; ++i) before -= changes[i].units;
    if (before < 0) return at;
    margin = before;
  }
  return w;
}

bool in_fault(std::int64_t from, std::int64_t to, const std::vector<Window>& windows) {
  return std::any_of(windows.begin(), windows.end(),
                     [&](const Window& f) { return overlaps(from, to, f.from_ns, f.to_ns); });
}

std::int64_t p99(std::vector<std::int64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[(v.size() * 99 + 99) / 100 - 1];
}

void describe_late(const CheckInput& in, const WakeDelay& d, std::vector<std::string>& out) {
  const std::int64_t t0 = origin(in);
  const KillTimes kills = kills_by_pid(in);
  const Section& g = *d.section;
  out.push_back(fmt::format("latest grant after its units were free ({:.1f} ms, bound {:.0f} ms):",
                            static_cast<double>(d.delay_ns) / 1e6,
                            static_cast<double>(in.wake_bound_ns) / 1e6));
  out.push_back(fmt::format("  {} (free from {})", describe(g, valid_until(g, kills), t0),
                            ms_since(d.free_from_ns, t0)));
  describe_faults(in, d.free_from_ns - in.lease_ns, g.enter_ns, t0, out);
  describe_meanwhile(in, kills, d.free_from_ns - 50'000'000, g.enter_ns, {&g, nullptr}, t0, out);
}

}  // namespace

std::vector<Window> fault_windows(const CheckInput& in) {
  std::vector<Window> out;
  for (const Window& w : in.fault_windows) out.push_back({w.from_ns, w.to_ns + in.lease_ns, {}});
  for (const Kill& k : in.kills) out.push_back({k.at_ns, k.at_ns + in.lease_ns, {}});
  for (const Stop& st : in.stops) out.push_back({st.stop_ns, st.cont_ns + in.lease_ns, {}});
  return out;
}

std::vector<WakeDelay> wake_delays(const CheckInput& in) {
  const Held held(in);
  const std::vector<Window> faults = fault_windows(in);
  std::vector<const Section*> by_wait;
  std::int64_t longest_wait = 0;
  for (const Section& s : in.sections) {
    by_wait.push_back(&s);
    longest_wait = std::max(longest_wait, s.enter_ns - s.wait_ns);
  }
  std::sort(by_wait.begin(), by_wait.end(),
            [](const Section* a, const Section* b) { return a->wait_ns < b->wait_ns; });
  std::vector<WakeDelay> out;
  for (const Section& g : in.sections) {
    if (g.mode == Mode::try_acquire || g.previous) continue;
    WakeDelay d;
    d.section = &g;
    d.free_from_ns = free_from(g, in, held, by_wait, longest_wait);
    d.delay_ns = std::max<std::int64_t>(0, record::judged_enter(g) - d.free_from_ns);
    d.in_fault = in_fault(d.free_from_ns, g.enter_ns, faults);
    out.push_back(d);
  }
  return out;
}

void check_wake_ups(const CheckInput& in, CheckResult& out) {
  const std::vector<WakeDelay> delays = wake_delays(in);
  std::vector<std::int64_t> outside;
  std::vector<std::int64_t> inside;
  const WakeDelay* latest = nullptr;
  for (const WakeDelay& d : delays) {
    if (d.in_fault) {
      inside.push_back(d.delay_ns);
      out.wake_worst_in_ns = std::max(out.wake_worst_in_ns, d.delay_ns);
      continue;
    }
    outside.push_back(d.delay_ns);
    out.wake_worst_out_ns = std::max(out.wake_worst_out_ns, d.delay_ns);
    if (in.wake_bound_ns > 0 && d.delay_ns > in.wake_bound_ns) {
      ++out.wake_ups_late;
      if (latest == nullptr || d.delay_ns > latest->delay_ns) latest = &d;
    }
  }
  out.wake_ups_out = outside.size();
  out.wake_ups_in = inside.size();
  out.wake_p99_out_ns = p99(std::move(outside));
  out.wake_p99_in_ns = p99(std::move(inside));
  if (latest == nullptr) return;
  describe_late(in, *latest, out.details);
  out.failures.push_back(fmt::format(
      "{} blocking grants came more than {:.0f} ms after their units were free, outside faults "
      "(worst {:.1f} ms)",
      out.wake_ups_late, static_cast<double>(in.wake_bound_ns) / 1e6,
      static_cast<double>(out.wake_worst_out_ns) / 1e6));
}

}  // namespace fairsem::stress
