#include "invariants.hpp"

#include <algorithm>
#include <map>
#include <sstream>

#include "fairsem/version.hpp"

namespace fairsem::model {

namespace {

std::vector<long long> slots_of(const std::string& stored) {
  std::vector<long long> out;
  std::stringstream in(stored);
  std::string part;
  while (std::getline(in, part, ',')) out.push_back(std::stoll(part));
  return out;
}

std::string slot_list(const std::vector<long long>& slots) {
  std::string out;
  for (long long slot : slots) out += (out.empty() ? "" : ",") + std::to_string(slot);
  return out;
}

long long field(const std::map<std::string, std::string>& hash, const std::string& name,
                long long absent) {
  const auto it = hash.find(name);
  return it == hash.end() ? absent : std::stoll(it->second);
}

template <typename Map>
std::string show_map(const Map& m) {
  std::ostringstream out;
  out << '{';
  for (const auto& [k, v] : m) out << k << '=' << v << ' ';
  out << '}';
  return out.str();
}

}  // namespace

std::string check_invariants(const RawState& raw, History& history, bool shrunk) {
  const long long limit = field(raw.meta, "limit", 0);
  const long long top = field(raw.meta, "slots", 0);
  // Data model 3: holders need not come first (a promoted waiter gets a new ticket).
  const bool fair = field(raw.meta, "model", 2) == 3;
  // A later data model's semaphore: every run is refused and writes nothing (checked apart).
  if (field(raw.meta, "model", 2) > 3) return "";
  // Holders first in ticket order: the members with slots are a prefix of owner.
  std::size_t holders = 0;
  std::vector<std::string> holding;
  long long units = 0;
  std::set<long long> used;
  for (std::size_t i = 0; i < raw.owner.size(); ++i) {
    const auto it = raw.slots.find(raw.owner[i].first);
    if (it == raw.slots.end()) continue;
    holding.push_back(raw.owner[i].first);
    if (holders != i && !fair) {
      return "holders come first in ticket order: " + raw.owner[i].first + " holds behind a waiter";
    }
    ++holders;
    for (long long slot : slots_of(it->second)) {
      if (slot < 0 || slot >= top || !used.insert(slot).second) {
        return "slots are unique and below meta's slots (" + std::to_string(top) +
               "): " + raw.owner[i].first + " has " + it->second;
      }
      ++units;
    }
  }
  if (raw.slots.size() != holders)
    return "every holder is a member of owner: " + show_map(raw.slots);
  for (long long slot : raw.free) {
    if (used.count(slot) != 0 || slot < 0 || slot >= top) {
      return "free holds only slots nobody holds, below meta's slots: " + std::to_string(slot);
    }
  }
  if (static_cast<long long>(used.size() + raw.free.size()) != top) {
    return "every slot below meta's slots is held or free";
  }
  // Units held <= limit; after a shrink, the holders kept past it may hold more until they go.
  if (shrunk) {
    history.kept_past_shrink.insert(holding.begin(), holding.end());
  }
  if (units <= limit) {
    history.kept_past_shrink.clear();
  } else {
    for (const std::string& id : holding) {
      if (history.kept_past_shrink.count(id) == 0) {
        return "units held <= limit: " + std::to_string(units) + " held, limit " +
               std::to_string(limit) + ", " + id + " granted above it";
      }
    }
  }
  if (fair) {
    const std::string broken = check_fair_invariants(raw, limit - units);
    if (!broken.empty()) return broken;
  } else if (!raw.tenants.empty() || !raw.queues.empty() || !raw.idle.empty()) {
    return "only data model 3 has tenants' keys";
  }
  const std::string granted = check_grants(raw, history);
  if (!granted.empty()) return granted;
  // Nobody waits unless the head asks for more units than are free.
  if (!fair && holders < raw.owner.size()) {
    const std::string& head = raw.owner[holders].first;
    const long long asked = field(raw.info, "{units}" + head, 1);
    if (asked <= limit - units) {
      return "nobody waits unless the head asks for more than is free: head " + head +
             " asks for " + std::to_string(asked) + ", " + std::to_string(limit - units) +
             " free (limit " + std::to_string(limit) + ")";
    }
  }
  // Tickets strictly rise: a new entry's ticket is above every ticket seen before.
  const long long before = history.max_ticket;
  for (const auto& [id, ticket] : raw.owner) {
    if (history.seen.count({id, ticket}) != 0) continue;
    if (ticket <= before) {
      return "tokens strictly rise: " + id + " got ticket " + std::to_string(ticket) +
             ", not above " + std::to_string(before) + " handed out before";
    }
    history.seen.insert({id, ticket});
    history.max_ticket = std::max(history.max_ticket, ticket);
  }
  // Every key has a TTL whenever an expiry is stored; wake lists and receipts always do.
  if (field(raw.meta, "expiry", 0) > 0) {
    for (const auto& [key, ttl] : raw.ttl) {
      if (ttl < 0) return "every key has a TTL while an expiry is stored: " + key + " has none";
    }
    for (const auto& [key, ttl] : raw.fair_ttl) {
      if (ttl < 0) return "every key has a TTL while an expiry is stored: " + key + " has none";
    }
  }
  for (const auto& [key, ttl] : raw.other_ttl) {
    if (ttl < 0) return "every wake list and receipts bucket expires: " + key + " does not";
  }
  return "";
}

std::string compare_state(const RawState& raw, const Model& model,
                          const std::vector<std::string>& ids) {
  const Semaphore& s = model.semaphore();
  std::map<std::string, std::string> meta;
  if (s.limit) meta["limit"] = std::to_string(*s.limit);
  if (s.slots_field) meta["slots"] = std::to_string(*s.slots_field);
  if (s.expiry) meta["expiry"] = std::to_string(*s.expiry);
  if (s.expires) meta["expires"] = std::to_string(*s.expires);
  if (s.later_model) {
    meta["model"] = "4";
    meta["model_by"] = "9.9.9";
  } else if (s.fair.on) {
    meta["model"] = "3";
    meta["model_by"] = FAIRSEM_VERSION_STRING;
  }
  if (s.fair.vtime) meta["vtime"] = Fair::vnum(*s.fair.vtime);
  if (raw.meta != meta)
    return "meta is " + show_map(raw.meta) + ", the model has " + show_map(meta);
  const std::string counter = s.counter ? std::to_string(*s.counter) : "(none)";
  if (raw.counter.value_or("(none)") != counter) {
    return "counter is " + raw.counter.value_or("(none)") + ", the model has " + counter;
  }
  std::vector<std::pair<std::string, long long>> owner, time;
  std::map<std::string, std::string> info, slots;
  for (const Entry& e : s.entries) {
    owner.emplace_back(e.id, e.ticket);
    time.emplace_back(e.id, e.deadline);
    info[e.id] = e.info;
    if (!e.holder() && e.units != 1) info["{units}" + e.id] = std::to_string(e.units);
    if (!e.client.empty()) info["{inbox}" + e.id] = e.client;
    if (e.queued) info["{queued}" + e.id] = std::to_string(*e.queued);
    if (!e.tenant.empty()) info["{tenant}" + e.id] = e.tenant;
    if (e.was) info["{was}" + e.id] = std::to_string(*e.was);
    if (e.holder()) slots[e.id] = slot_list(e.slots);
  }
  std::sort(time.begin(), time.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second < b.second : a.first < b.first;
  });
  const auto show_z = [](const std::vector<std::pair<std::string, long long>>& z) {
    std::ostringstream out;
    for (const auto& [m, score] : z) out << m << ':' << score << ' ';
    return out.str();
  };
  if (raw.owner != owner)
    return "owner is " + show_z(raw.owner) + ", the model has " + show_z(owner);
  if (raw.time != time) return "time is " + show_z(raw.time) + ", the model has " + show_z(time);
  if (raw.info != info)
    return "info is " + show_map(raw.info) + ", the model has " + show_map(info);
  if (raw.slots != slots) {
    return "slots is " + show_map(raw.slots) + ", the model has " + show_map(slots);
  }
  if (raw.free != std::vector<long long>(s.free.begin(), s.free.end())) {
    return "free is " + slot_list(raw.free) + ", the model has " +
           slot_list(std::vector<long long>(s.free.begin(), s.free.end()));
  }
  for (const std::string& id : ids) {
    const auto it = raw.markers.find(id);
    const std::string got = it == raw.markers.end() ? "" : it->second;
    if (got != model.marker(id)) {
      return "the wake list of " + id + " starts with '" + got + "', the model has '" +
             model.marker(id) + "'";
    }
  }
  const std::string fair = compare_fair_state(raw, model);
  if (!fair.empty()) return fair;
  // With an expiry, the seven keys expire together at meta's `expires`.
  for (const auto& [key, ttl] : raw.ttl) {
    const long long want = s.expiry && s.expires ? *s.expires - model.now() : -1;
    if (ttl != want) {
      return key + " expires in " + std::to_string(ttl) + " ms, the model says " +
             std::to_string(want) + " (-1: never)";
    }
  }
  return "";
}

std::string show(const RawState& raw) {
  std::ostringstream out;
  out << "meta " << show_map(raw.meta) << " counter " << raw.counter.value_or("(none)")
      << " owner {";
  for (const auto& [id, ticket] : raw.owner) out << id << ':' << ticket << ' ';
  out << "} time {";
  for (const auto& [id, deadline] : raw.time) out << id << ':' << deadline << ' ';
  out << "} info " << show_map(raw.info) << " slots " << show_map(raw.slots) << " free {"
      << slot_list(raw.free) << "} tenants {";
  for (const auto& [member, vt] : raw.tenants) out << member << ':' << vt << ' ';
  out << "} idle {";
  for (const auto& [tenant, vt] : raw.idle) out << tenant << ':' << vt << ' ';
  out << "} queues {";
  for (const auto& [tenant, q] : raw.queues) {
    out << '\'' << tenant << "':";
    for (const auto& [id, ticket] : q) out << ' ' << id << ':' << ticket;
    out << "; ";
  }
  out << "} weights " << show_map(raw.weights) << " ttl " << show_map(raw.ttl)
      << " other keys' ttl " << show_map(raw.other_ttl) << " markers " << show_map(raw.markers);
  return out.str();
}

std::string describe(const Model& model) {
  const Semaphore& s = model.semaphore();
  std::ostringstream out;
  out << "limit " << s.limit.value_or(-1) << " slots " << s.slots_field.value_or(-1) << " expiry "
      << s.expiry.value_or(-1) << " expires " << s.expires.value_or(-1) << " later "
      << s.later_model << " fair " << s.fair.on << " vtime " << s.fair.vtime.value_or(-1)
      << " counter " << s.counter.value_or(-1) << " free " << s.free.size();
  for (const Entry& e : s.entries) {
    out << " | " << e.id << ' ' << e.ticket << ' ' << e.deadline << ' ' << e.units << " ["
        << slot_list(e.slots) << "] " << e.client << ' ' << e.queued.value_or(-1) << " '"
        << e.tenant << "' " << e.was.value_or(-1);
  }
  for (const auto& [tenant, vt] : s.fair.active) out << " | active '" << tenant << "' " << vt;
  for (const auto& [tenant, vt] : s.fair.idle) out << " | idle '" << tenant << "' " << vt;
  for (const auto& [tenant, w] : s.fair.weights) out << " | weight '" << tenant << "' " << w;
  for (const auto& [id, marker] : model.markers()) {
    out << " | " << id << ' ' << marker.first << ' ' << marker.second;
  }
  return out.str();
}

}  // namespace fairsem::model
