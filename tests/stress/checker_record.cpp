#include "checker_record.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace fairsem::stress::record {

KillTimes kills_by_pid(const CheckInput& in) {
  KillTimes kills;
  for (const Kill& k : in.kills) kills.emplace(k.pid, k.at_ns);
  return kills;
}

std::int64_t valid_until(const Section& s, const KillTimes& kills) {
  if (s.left) return s.lost ? std::min(s.leave_ns, s.deadline_ns) : s.leave_ns;
  const auto [first, last] = kills.equal_range(s.pid);
  std::int64_t end = kNever;
  for (auto it = first; it != last; ++it) {
    if (it->second >= s.enter_ns) end = std::min(end, it->second);
  }
  return end == kNever ? end : std::min(end, s.deadline_ns);
}

void count_lease_used(const std::vector<const Section*>& sections, std::int64_t lease_ns,
                      CheckResult& out) {
  std::vector<std::int64_t> used;
  used.reserve(sections.size());
  for (const Section* s : sections) {
    const std::int64_t u = lease_used(*s, lease_ns);
    if (u < 0) continue;
    used.push_back(u);
    if (u > out.lease_used_worst_ns) {
      out.lease_used_worst_ns = u;
      out.lease_used_worst_token = s->token;
      out.lease_used_worst_cpu_wait_ns = s->cpu_wait_ns;
    }
  }
  if (used.empty()) return;
  const auto at = used.begin() + static_cast<std::ptrdiff_t>((used.size() - 1) * 99 / 100);
  std::nth_element(used.begin(), at, used.end());
  out.lease_used_p99_ns = *at;
}

std::int64_t origin(const CheckInput& in) {
  std::int64_t first = kNever;
  for (const Section& s : in.sections) first = std::min(first, s.wait_ns);
  for (const Timeout& t : in.timeouts) first = std::min(first, t.wait_ns);
  return first == kNever ? 0 : first;
}

std::string ms_since(std::int64_t t, std::int64_t origin) {
  if (t == kNever) return "never";
  return fmt::format("{:.3f}", static_cast<double>(t - origin) / 1e6);
}

std::string describe(const Section& s, std::int64_t end, std::int64_t origin) {
  std::string out = fmt::format(
      "token {} pid {} mode {} units {} slots [{}] wait {} enter {} valid until {} (left {}, "
      "leave {}, lost {}, deadline {}, at the enter {}; waited {} ms for a CPU)",
      s.token, s.pid, static_cast<int>(s.mode), s.units, fmt::join(s.slots, ","),
      ms_since(s.wait_ns, origin), ms_since(s.enter_ns, origin), ms_since(end, origin), s.left,
      s.left ? ms_since(s.leave_ns, origin) : "-", s.lost, ms_since(s.deadline_ns, origin),
      s.granted_deadline_ns == 0 ? "-" : ms_since(s.granted_deadline_ns, origin),
      s.cpu_wait_ns < 0 ? "?" : fmt::format("{:.1f}", static_cast<double>(s.cpu_wait_ns) / 1e6));
  if (s.partial_ns != 0) {
    out += fmt::format("; partial release at {} kept [{}]{}", ms_since(s.partial_ns, origin),
                       fmt::join(s.kept, ","), s.partial_failed ? " (threw)" : "");
  }
  return out;
}

void describe_faults(const CheckInput& in, std::int64_t from, std::int64_t to, std::int64_t origin,
                     std::vector<std::string>& out) {
  for (const Kill& k : in.kills) {
    if (overlaps(from, to, k.at_ns, k.at_ns)) {
      out.push_back(fmt::format("  kill of pid {} at {}", k.pid, ms_since(k.at_ns, origin)));
    }
  }
  for (const Stop& st : in.stops) {
    if (overlaps(from, to, st.stop_ns, st.cont_ns)) {
      out.push_back(fmt::format("  stop of pid {} from {} to {}", st.pid,
                                ms_since(st.stop_ns, origin), ms_since(st.cont_ns, origin)));
    }
  }
  for (const Window& w : in.disturbances) {
    if (overlaps(from, to, w.from_ns, w.to_ns)) {
      out.push_back(fmt::format("  disturbance from {} to {} (pids [{}])",
                                ms_since(w.from_ns, origin), ms_since(w.to_ns, origin),
                                fmt::join(w.pids, ",")));
    }
  }
}

std::int64_t partial_until(const Section& s, std::int64_t end) {
  if (s.partial_ns == 0) return end;
  return std::min(std::max(s.partial_ns, s.enter_ns), end);
}

long long given_back(const Section& s) {
  if (s.partial_ns == 0) return 0;
  return std::max(0LL, s.units - static_cast<long long>(s.kept.size()));
}

void describe_meanwhile(const CheckInput& in, const KillTimes& kills, std::int64_t from,
                        std::int64_t to, std::array<const Section*, 2> skip, std::int64_t t0,
                        std::vector<std::string>& out) {
  std::size_t listed = 0;
  for (const Section& s : in.sections) {
    const std::int64_t end = valid_until(s, kills);
    const bool ended = overlaps(from, to, end, end);
    const bool partial = s.partial_ns != 0 && overlaps(from, to, s.partial_ns, s.partial_ns);
    const bool entered = overlaps(from, to, s.enter_ns, s.enter_ns);
    if (&s == skip[0] || &s == skip[1] || !(ended || partial || entered)) continue;
    if (++listed > 20) break;
    out.push_back(fmt::format("  meanwhile{}{}{}: {}", entered ? " entered" : "",
                              partial ? " gave back" : "", ended ? " ended" : "",
                              describe(s, end, t0)));
  }
}

/// The first timed-out waiter a later request passed, the request, and the faults and sections
/// around them.
void describe_overtaken_timeout(const CheckInput& in, const Timeout& t, const Section& passer,
                                std::vector<std::string>& out) {
  const std::int64_t t0 = origin(in);
  const KillTimes kills = kills_by_pid(in);
  out.emplace_back("first timed-out waiter passed by a later request:");
  out.push_back(fmt::format("  timed out: pid {} units {} wait {} deadline {} returned {}", t.pid,
                            t.units, ms_since(t.wait_ns, t0), ms_since(t.deadline_ns, t0),
                            ms_since(t.end_ns, t0)));
  out.push_back("  passed by: " + describe(passer, valid_until(passer, kills), t0));
  // A holder killed up to a lease before can have passed its units on in the window too.
  describe_faults(in, t.wait_ns - in.lease_ns - 200'000'000, t.deadline_ns, t0, out);
  describe_meanwhile(in, kills, t.wait_ns, t.deadline_ns, {&passer, nullptr}, t0, out);
}

}  // namespace fairsem::stress::record
