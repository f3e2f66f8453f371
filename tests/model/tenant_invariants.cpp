// The model checker's assertions on the keys of data model 3 (src/lua/semaphore/tenants.lua):
// the queues, OWNER:tenants, OWNER:idle, META:weights and the grant order across tenants.

#include <algorithm>
#include <sstream>

#include "invariants.hpp"

namespace fairsem::model {

namespace {

std::string info_field(const RawState& raw, const std::string& name) {
  const auto it = raw.info.find(name);
  return it == raw.info.end() ? "" : it->second;
}

template <typename Pairs>
std::string pairs_text(const Pairs& z) {
  std::ostringstream out;
  out.precision(17);
  for (const auto& [m, score] : z) out << m << ':' << score << ' ';
  return out.str();
}

}  // namespace

FairView fair_view(const RawState& raw) {
  FairView v;
  for (const auto& [id, ticket] : raw.owner) {
    if (raw.slots.count(id) != 0) continue;
    v.waiters[info_field(raw, "{tenant}" + id)].emplace_back(id, ticket);
  }
  return v;
}

std::string check_fair_invariants(const RawState& raw, long long free_units) {
  const FairView v = fair_view(raw);
  // Each tenant's queue is its waiters in ticket order; no queue for a tenant with none.
  if (raw.queues != v.waiters) {
    std::string got, want;
    for (const auto& [t, q] : raw.queues) got += "'" + t + "': " + pairs_text(q);
    for (const auto& [t, q] : v.waiters) want += "'" + t + "': " + pairs_text(q);
    return "each tenant's queue holds its waiters in ticket order: queues " + got + "; waiters " +
           want;
  }
  // OWNER:tenants: one member per tenant with waiters, named after its first waiter's ticket.
  std::vector<std::string> members, want;
  for (const auto& [member, vt] : raw.tenants) members.push_back(member);
  for (const auto& [t, q] : v.waiters) want.push_back(Fair::member(q.front().second, t));
  std::sort(members.begin(), members.end());
  std::sort(want.begin(), want.end());
  if (members != want) {
    return "OWNER:tenants has one member per waiting tenant, HEAD:TENANT: it has " +
           pairs_text(raw.tenants);
  }
  // Virtual times: no waiting tenant is behind the semaphore's, no idle one at or below it.
  const auto vt_field = raw.meta.find("vtime");
  const double vtime = vt_field == raw.meta.end() ? 0 : std::stod(vt_field->second);
  for (const auto& [member, vt] : raw.tenants) {
    if (vt < vtime) return "no tenant's virtual time is behind the semaphore's: " + member;
  }
  for (const auto& [tenant, vt] : raw.idle) {
    if (vt <= vtime) return "OWNER:idle keeps only times above the semaphore's: " + tenant;
  }
  // Work-conserving, no passing: the head of the tenant chosen next does not fit.
  if (!raw.tenants.empty()) {
    const std::string& member = raw.tenants.front().first;  // (score order, then member)
    const std::string tenant = member.substr(17);
    const std::string& head = v.waiters.at(tenant).front().first;
    const std::string units = info_field(raw, "{units}" + head);
    const long long asked = units.empty() ? 1 : std::stoll(units);
    if (asked <= free_units) {
      return "nobody waits unless the next tenant's first waiter does not fit: " + head + " of '" +
             tenant + "' asks for " + std::to_string(asked) + ", " + std::to_string(free_units) +
             " free";
    }
  }
  return "";
}

std::string check_grants(const RawState& raw, History& history) {
  const FairView v = fair_view(raw);
  const long long before = history.max_granted;
  for (const auto& [id, ticket] : raw.owner) {
    if (raw.slots.count(id) == 0 || !history.granted.insert({id, ticket}).second) continue;
    // Fencing tokens rise strictly in grant order, across runs.
    if (ticket <= before) {
      return "fencing tokens rise in grant order: " + id + " was granted " +
             std::to_string(ticket) + ", not above " + std::to_string(before);
    }
    history.max_granted = std::max(history.max_granted, ticket);
    // FIFO within a tenant: nobody of its tenant who queued before it still waits.
    const std::string was = info_field(raw, "{was}" + id);
    if (was.empty()) continue;
    const auto q = v.waiters.find(info_field(raw, "{tenant}" + id));
    if (q != v.waiters.end() && q->second.front().second < std::stoll(was)) {
      return "FIFO within a tenant: " + id + " (queued as " + was + ") was granted before " +
             q->second.front().first + " (" + std::to_string(q->second.front().second) + ")";
    }
  }
  return "";
}

std::string compare_fair_state(const RawState& raw, const Model& model) {
  const Semaphore& s = model.semaphore();
  const Fair& f = s.fair;
  std::vector<std::pair<std::string, double>> tenants, idle;
  std::map<std::string, std::vector<std::pair<std::string, long long>>> queues;
  for (const auto& [tenant, vt] : f.active) {
    const std::vector<const Entry*> q = s.queue(tenant);
    if (q.empty()) return "the model has tenant '" + tenant + "' active with no waiter";
    tenants.emplace_back(Fair::member(q.front()->ticket, tenant), vt);
    for (const Entry* e : q) queues[tenant].emplace_back(e->id, e->ticket);
  }
  for (const auto& [tenant, vt] : f.idle) idle.emplace_back(tenant, vt);
  const auto by_score = [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second < b.second : a.first < b.first;
  };
  std::sort(tenants.begin(), tenants.end(), by_score);
  std::sort(idle.begin(), idle.end(), by_score);
  if (raw.tenants != tenants) {
    return "OWNER:tenants is " + pairs_text(raw.tenants) + ", the model has " + pairs_text(tenants);
  }
  if (raw.idle != idle) {
    return "OWNER:idle is " + pairs_text(raw.idle) + ", the model has " + pairs_text(idle);
  }
  if (raw.queues != queues) return "the tenants' queues differ from the model's";
  std::map<std::string, std::string> weights;
  for (const auto& [tenant, weight] : f.weights) weights[tenant] = std::to_string(weight);
  if (raw.weights != weights) {
    return "META:weights is " + pairs_text(raw.weights) + ", the model has " + pairs_text(weights);
  }
  for (const auto& [key, ttl] : raw.fair_ttl) {
    const long long want = s.expiry && s.expires ? *s.expires - model.now() : -1;
    if (ttl != want) {
      return key + " expires in " + std::to_string(ttl) + " ms, the model says " +
             std::to_string(want) + " (-1: never)";
    }
  }
  return "";
}

}  // namespace fairsem::model
