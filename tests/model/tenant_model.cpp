// The reference model of data model 3 (src/lua/semaphore/tenants.lua): fair shares between
// tenants. The rest of the model is semaphore_model.cpp.

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "semaphore_model.hpp"

namespace fairsem::model {

long long Fair::weight(const std::string& tenant) const {
  for (const auto& [name, weight] : weights) {
    if (name == tenant) return weight;
  }
  return 1;
}

std::string Fair::member(long long ticket, const std::string& tenant) {
  char head[32];
  std::snprintf(head, sizeof head, "%016lld", ticket);
  return head + (":" + tenant);
}

std::string Fair::vnum(double x) {
  char out[64];
  std::snprintf(out, sizeof out, "%.17g", x);
  return out;
}

std::vector<const Entry*> Semaphore::queue(const std::string& tenant) const {
  std::vector<const Entry*> out;
  for (const Entry& e : entries) {
    if (!e.holder() && e.tenant == tenant) out.push_back(&e);
  }
  return out;  // entries are in ticket order
}

void Model::sort_entries() {
  std::stable_sort(s_.entries.begin(), s_.entries.end(),
                   [](const Entry& a, const Entry& b) { return a.ticket < b.ticket; });
}

long long Model::fair_position(const Entry& e) const {
  const std::vector<const Entry*> q = s_.queue(e.tenant);
  const auto at = std::find(q.begin(), q.end(), &e);
  return at == q.end() ? 1 : (at - q.begin()) + 1;
}

void Model::upgrade() {
  s_.fair.on = true;
  if (!s_.queue("").empty()) enqueue("");  // the waiters so far: the default tenant's queue
}

void Model::enqueue(const std::string& tenant) {
  Fair& f = s_.fair;
  if (f.active.count(tenant) != 0) return;  // it waited already: its first waiter stays
  // A tenant becoming active starts at the semaphore's virtual time, or where it went idle.
  const auto idle = f.idle.find(tenant);
  double vt = f.vtime.value_or(0);
  if (idle != f.idle.end()) {
    vt = std::max(vt, idle->second);
    f.idle.erase(idle);
  }
  f.active[tenant] = vt;
  born();  // its queue, OWNER:tenants
}

void Model::unqueue(const std::string& tenant, bool was_head) {
  if (s_.queue(tenant).empty()) {
    s_.fair.active.erase(tenant);  // (not idle: it was not granted)
  } else if (was_head) {
    born();  // OWNER:tenants gets the member of its new first waiter
  }
}

void Model::promote_fair(std::vector<long long>* freed) {
  Fair& f = s_.fair;
  long long room = limit_ - units_held();
  while (room > 0) {
    // The tenant with the smallest virtual time, ties by its first waiter's ticket (the member).
    std::string tenant, best;
    double vt = 0;
    for (const auto& [name, time] : f.active) {
      const std::vector<const Entry*> q = s_.queue(name);
      if (q.empty()) throw std::logic_error("model: tenant '" + name + "' active with no waiter");
      const std::string m = Fair::member(q.front()->ticket, name);
      if (best.empty() || time < vt || (time == vt && m < best)) {
        tenant = name;
        best = m;
        vt = time;
      }
    }
    if (best.empty()) return;
    Entry* w = find(s_.queue(tenant).front()->id);
    if (w->units > limit_) {
      remove(w->id, "too-large", lease_);
      continue;
    }
    if (w->units > room) return;
    if (held_count() == 0) born();  // the slots hash
    w->slots = take_slots(w->units, freed);
    // A new ticket: fencing tokens rise in grant order.
    long long granted = s_.counter.value_or(0) + 1;
    const long long newest = s_.entries.back().ticket;
    if (granted <= newest) {
      granted = newest + 1;
      born();  // the counter, SET
    }
    s_.counter = granted;
    w->was = w->ticket;
    w->ticket = granted;
    const long long units = w->units;
    sort_entries();
    f.vtime = vt;
    const double next = vt + static_cast<double>(units) / static_cast<double>(f.weight(tenant));
    if (!s_.queue(tenant).empty()) {
      f.active[tenant] = next;
      born();  // OWNER:tenants, made again if this was its only member
    } else {
      f.active.erase(tenant);
      f.idle[tenant] = next;
      born();  // OWNER:idle
    }
    for (auto it = f.idle.begin(); it != f.idle.end();) {
      it = it->second <= vt ? f.idle.erase(it) : std::next(it);
    }
    room -= units;
    ++promoted_;
  }
}

Reply Model::tenant(const Call& c) {
  if (auto refused = prepare(c, 0)) return *refused;
  if (!s_.fair.on) upgrade();
  Fair& f = s_.fair;
  const long long old = f.weight(c.tenant);
  const auto it = std::find_if(f.weights.begin(), f.weights.end(),
                               [&](const auto& w) { return w.first == c.tenant; });
  if (c.weight == 1) {
    if (it != f.weights.end()) f.weights.erase(it);
  } else {
    if (it != f.weights.end()) {
      it->second = c.weight;
    } else {
      f.weights.emplace_back(c.tenant, c.weight);
    }
    born();  // META:weights
  }
  return {old};
}

}  // namespace fairsem::model
