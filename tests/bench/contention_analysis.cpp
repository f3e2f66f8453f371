#include "contention_analysis.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "contention_order.hpp"

namespace fairsem::bench::contention {
namespace {

nlohmann::json spread(std::vector<double> v) {
  nlohmann::json j;
  j["count"] = v.size();
  j["p50"] = percentile(v, 50);
  j["p90"] = percentile(v, 90);
  j["p99"] = percentile(v, 99);
  j["p999"] = percentile(v, 99.9);
  j["max"] = v.empty() ? 0.0 : v.back();
  return j;
}

struct Held {
  int holders = 0;
  long long units = 0;
};

/// The most holders and units held at once, from the clients' own [enter, release] intervals.
Held most_held(const std::vector<Record>& granted) {
  std::vector<std::pair<std::int64_t, long long>> events;
  events.reserve(2 * granted.size());
  for (const Record& r : granted) {
    events.emplace_back(r.enter_ns, r.units);
    events.emplace_back(r.release_ns, -r.units);
  }
  std::sort(events.begin(), events.end());  // a release sorts before an enter at the same ns
  Held now;
  Held most;
  for (const auto& [when, units] : events) {
    now.holders += units > 0 ? 1 : -1;
    now.units += units;
    most.holders = std::max(most.holders, now.holders);
    most.units = std::max(most.units, now.units);
  }
  return most;
}

/// The weighted figures, per weight (issue 16): how many grants each got, how long its
/// requests waited, how many were still waiting when the run ended, and its worst wait against
/// its fair share.
///
/// Fair share: under strict FIFO a request waits for the requests queued before it, whatever
/// its own units. In this closed loop (each client has one request out at a time) those are at
/// most one request of each other client: a client's next request joins the queue behind it.
/// So a request of any weight is fairly served once every other client has had one turn, and
/// its fair share is the time the run took, at its own grant rate, to make that many grants:
/// fair_share_us = (clients - 1) / grants_per_s, the time to drain the longest queue FIFO can
/// put ahead of it. (Not the mean wait of the weight itself: a weight that waits too long every
/// time would have a high mean of its own and pass. mean_wait_us is reported beside it, per
/// weight and for the run.) A weight's worst wait is the longest wait of its granted requests
/// or, where longer, how long one of its requests had been waiting when the run ended (still
/// waiting then: a lower bound). Issue 16's target is worst <= 2 x fair share: twice the
/// drain of a full queue allows for grants slower than average while it waits; a request that
/// waited longer was overtaken many times, or starved.
nlohmann::json by_units(const Settings& s, const std::vector<Record>& all, double grants_per_s,
                        double span_s, const std::map<long long, long long>& overtaken) {
  struct Weight {
    std::vector<double> waits;
    double oldest_waiting_us = 0;
    long long waiting = 0;
    std::map<int, long long> per_client;
  };
  std::map<long long, Weight> weights;
  for (int c = 0; c < s.clients; ++c) weights[s.units_of(c)].per_client[c] = 0;
  for (const Record& r : all) {
    Weight& w = weights[r.units];
    if (r.granted()) {
      const double wait = static_cast<double>(r.enter_ns - r.ask_ns) / 1e3;
      w.waits.push_back(wait);
      ++w.per_client[r.client];
    } else {
      ++w.waiting;
      w.oldest_waiting_us =
          std::max(w.oldest_waiting_us, static_cast<double>(r.release_ns - r.ask_ns) / 1e3);
    }
  }
  const double fair_share = grants_per_s > 0 ? (s.clients - 1) / grants_per_s * 1e6 : 0.0;
  nlohmann::json out = nlohmann::json::object();
  for (auto& [units, w] : weights) {
    nlohmann::json j;
    j["clients"] = w.per_client.size();
    j["grants"] = w.waits.size();
    j["grants_per_s"] = span_s > 0 ? static_cast<double>(w.waits.size()) / span_s : 0.0;
    double sum = 0;
    for (double x : w.waits) sum += x;
    j["mean_wait_us"] = w.waits.empty() ? 0.0 : sum / static_cast<double>(w.waits.size());
    j["wait_us"] = spread(w.waits);
    j["waiting_at_end"] = w.waiting;
    j["oldest_waiting_at_end_us"] = w.oldest_waiting_us;
    const double worst = std::max(j["wait_us"]["max"].get<double>(), w.oldest_waiting_us);
    j["worst_wait_us"] = worst;
    j["fair_share_us"] = fair_share;
    j["worst_over_fair_share"] = fair_share > 0 ? worst / fair_share : 0.0;
    j["p99_over_fair_share"] =
        fair_share > 0 ? j["wait_us"]["p99"].get<double>() / fair_share : 0.0;
    j["worst_within_2x_fair_share"] = fair_share > 0 && worst <= 2 * fair_share;
    const auto it = overtaken.find(units);
    j["overtaken"] = it == overtaken.end() ? 0 : it->second;
    long long least = -1;
    long long most = 0;
    for (const auto& [client, n] : w.per_client) {
      least = least < 0 ? n : std::min(least, n);
      most = std::max(most, n);
    }
    j["per_client_grants"] = {{"min", std::max(least, 0LL)}, {"max", most}};
    out[std::to_string(units)] = j;
  }
  return out;
}

}  // namespace

nlohmann::json analyze(const Settings& s, const std::vector<Record>& all, const ServerStats& used) {
  nlohmann::json j;
  j["impl"] = s.impl;
  j["scenario"] = s.weighted() ? "weighted" : "contention";
  j["mode"] = s.mode;
  j["clients"] = s.clients;
  j["limit"] = s.limit;
  j["hold_ms"] = s.hold_ms;
  j["seconds"] = s.seconds;
  if (s.weighted()) j["weights"] = s.weights;
  // The figures below are of granted requests; the requests that gave up when a weighted run
  // ended count where said (FIFO order, waiting_at_end, the worst waits by weight).
  std::vector<Record> records;
  for (const Record& r : all) {
    if (r.granted()) records.push_back(r);
  }
  const auto grants = static_cast<double>(records.size());
  j["grants"] = records.size();
  j["waiting_at_end"] = all.size() - records.size();
  if (records.empty()) return j;

  std::sort(records.begin(), records.end(),
            [](const Record& a, const Record& b) { return a.enter_ns < b.enter_ns; });
  std::int64_t first = records.front().ask_ns;
  std::int64_t last = 0;
  std::vector<double> waits;
  std::vector<double> holds;
  std::map<int, long long> per_client;
  for (const Record& r : records) {
    first = std::min(first, r.ask_ns);
    last = std::max(last, r.release_ns);
    waits.push_back(static_cast<double>(r.enter_ns - r.ask_ns) / 1e3);
    holds.push_back(static_cast<double>(r.release_ns - r.enter_ns) / 1e3);
    ++per_client[r.client];
  }
  const double span = static_cast<double>(last - first) / 1e9;
  j["span_s"] = span;
  j["grants_per_s"] = grants / span;
  j["wait_us"] = spread(waits);
  j["hold_us_p50"] = percentile(holds, 50);
  auto min_grants = static_cast<long long>(records.size());
  long long max_grants = 0;
  for (int c = 0; c < s.clients; ++c) {
    const long long n = per_client.count(c) != 0 ? per_client[c] : 0;
    min_grants = std::min(min_grants, n);
    max_grants = std::max(max_grants, n);
  }
  j["per_client_grants"] = {{"min", min_grants}, {"max", max_grants}};

  const Held held = most_held(records);
  j["max_holders_seen"] = held.holders;
  j["max_units_seen"] = held.units;

  // Hand-off (limit 1): from the release() call of one holder to the next holder's critical
  // section, when the next holder is another client that was already waiting.
  std::vector<double> handoffs;
  long long token_inversions = 0;
  for (std::size_t i = 1; i < records.size(); ++i) {
    const Record& prev = records[i - 1];
    const Record& next = records[i];
    if (prev.token >= 0 && next.token >= 0 && s.limit == 1 && next.token < prev.token) {
      ++token_inversions;
    }
    if (s.limit == 1 && next.client != prev.client && next.ask_ns < prev.release_ns) {
      handoffs.push_back(static_cast<double>(next.enter_ns - prev.release_ns) / 1e3);
    }
  }
  j["handoff_us"] = spread(handoffs);
  j["token_order_violations"] = records.front().token >= 0 ? token_inversions : -1;

  const FifoOrder fifo = fifo_order(s, all);
  j["fifo_tolerance_us"] = s.fifo_tolerance_us;
  j["fifo_grant_tolerance_us"] = s.fifo_grant_tolerance_us;
  j["fifo_violations"] = fifo.out_of_order;
  j["fifo_violation_share"] = static_cast<double>(fifo.out_of_order) / grants;
  j["fifo_violations_strict"] = fifo.strict;
  j["fifo_violation_margin_us"] = spread(fifo.margins);
  j["fifo_violations_queued_later"] = fifo.queued_later;
  const SlotChecks slots = slot_checks(records);
  j["slot_handovers_early"] = slots.early_handovers;
  j["ticket_order_proven_violations"] = slots.proven_out_of_order;

  const double hold_p50 = j["hold_us_p50"].get<double>();
  const double handoff_p50 = j["handoff_us"]["p50"].get<double>();
  const double bound = 2.0 * (s.clients - 1) * (hold_p50 + handoff_p50);
  j["worst_wait_bound_us"] = bound;
  j["worst_wait_within_bound"] = j["wait_us"]["max"].get<double>() <= bound;
  double wait_sum = 0;
  for (const double w : waits) wait_sum += w;
  j["mean_wait_us"] = wait_sum / grants;
  if (s.weighted()) j["by_units"] = by_units(s, all, grants / span, span, fifo.overtaken);

  j["client_commands_per_grant"] = static_cast<double>(used.client_commands()) / grants;
  j["redis_commands_per_grant"] = static_cast<double>(used.total_commands) / grants;
  j["redis_cpu_us_per_grant"] = used.cpu_seconds * 1e6 / grants;
  j["redis_exec_us_per_grant"] = static_cast<double>(used.client_usec()) / grants;
  nlohmann::json cmds = nlohmann::json::object();
  for (const auto& [name, c] : used.commands) {
    if (name != "info") cmds[name] = static_cast<double>(c.calls) / grants;
  }
  j["commands_per_grant_by_name"] = cmds;
  return j;
}

}  // namespace fairsem::bench::contention
