#pragma once

// What the checker reads from a run's record beyond its fields: when a section's permit stopped
// counting as held, what it gave back, and the lines a failure's details describe sections and
// faults with (times in ms since the first request).

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "checker.hpp"

namespace fairsem::stress::record {

inline constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

/// Whether [from, to] and [w_from, w_to] share an instant.
inline bool overlaps(std::int64_t from, std::int64_t to, std::int64_t w_from, std::int64_t w_to) {
  return from <= w_to && w_from <= to;
}

/// When each process was killed, by pid.
using KillTimes = std::multimap<int, std::int64_t>;
KillTimes kills_by_pid(const CheckInput& in);

/// When the section's permit stopped counting as held by it; kNever if unknown. A section its
/// process died in counts until the kill, or until the deadline last seen, if that came first:
/// a holder stuck in a call (a partial release through a blackholed connection) renews nothing
/// meanwhile, and its lease runs out in Redis before the kill.
std::int64_t valid_until(const Section& s, const KillTimes& kills);

/// When the section stopped using the units it gave back in a partial release (its end if it
/// made none, or made it too late to matter), given when its permit stopped being valid.
std::int64_t partial_until(const Section& s, std::int64_t end);

/// The units a section gave back in its partial release (none if it made none).
long long given_back(const Section& s);

/// How much of its lease `s` had used up when its client entered (see
/// CheckResult::lease_used_worst_ns); -1 when its deadline at the enter was not recorded.
inline std::int64_t lease_used(const Section& s, std::int64_t lease_ns) {
  return s.granted_deadline_ns == 0 ? -1 : s.enter_ns - (s.granted_deadline_ns - lease_ns);
}
/// When `s` would have entered had the threads that bring its grant had a CPU whenever they
/// could run: its enter less the longest any of them waited for one during the acquire
/// (Section::cpu_wait_ns). The order and wake-up checks judge this time for the late enter
/// (never for the earlier one, which could only invent an inversion): the kernel keeping woken
/// threads off the CPUs of a loaded machine is no late grant, while a lost wake-up or a slow
/// call leaves the threads asleep, which earns nothing.
inline std::int64_t judged_enter(const Section& s) {
  return s.enter_ns - std::max<std::int64_t>(0, s.cpu_wait_ns);
}
/// Fills CheckResult's lease_used figures from `sections`.
void count_lease_used(const std::vector<const Section*>& sections, std::int64_t lease_ns,
                      CheckResult& out);

/// The time of the first request: details give times relative to it.
std::int64_t origin(const CheckInput& in);
/// `t` in ms since `origin`, or "never".
std::string ms_since(std::int64_t t, std::int64_t origin);
/// One line on the section, valid until `end`.
std::string describe(const Section& s, std::int64_t end, std::int64_t origin);
/// The faults around `from` .. `to`.
void describe_faults(const CheckInput& in, std::int64_t from, std::int64_t to, std::int64_t origin,
                     std::vector<std::string>& out);
/// Up to 20 sections, but the two of `skip`, that entered, gave units back or ended between
/// `from` and `to`: what may have taken units, or passed them on, in that window.
void describe_meanwhile(const CheckInput& in, const KillTimes& kills, std::int64_t from,
                        std::int64_t to, std::array<const Section*, 2> skip, std::int64_t origin,
                        std::vector<std::string>& out);

/// The first timed-out waiter a later request passed, the request, and the faults and sections
/// around them.
void describe_overtaken_timeout(const CheckInput& in, const Timeout& t, const Section& passer,
                                std::vector<std::string>& out);

}  // namespace fairsem::stress::record
