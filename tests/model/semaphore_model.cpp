#include "semaphore_model.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace fairsem::model {

namespace {

constexpr long long kModel =
    3;  // the latest data model the scripts read and write (2, and 3 with tenants)
constexpr long long kReceiptBucketMs = 4096;  // common.lua's RECEIPT_BUCKET_MS, RECEIPT_BUCKETS
constexpr long long kReceiptBuckets = 16;

std::string joined(const std::vector<long long>& slots) {
  std::string out;
  for (long long slot : slots) out += (out.empty() ? "" : ",") + std::to_string(slot);
  return out;
}

bool admin(const std::string& op) {
  return op == "status" || op == "evict" || op == "resize" || op == "tenant";
}

}  // namespace

std::string show(const Reply& reply) {
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < reply.size(); ++i) {
    if (i > 0) out << ", ";
    if (const auto* n = std::get_if<long long>(&reply[i])) {
      out << *n;
    } else {
      out << '"' << std::get<std::string>(reply[i]) << '"';
    }
  }
  out << ']';
  return out.str();
}

void Model::set_clock(long long now) {
  now_ = now;
  if (s_.expiry.value_or(0) > 0 && s_.expires && now_ > *s_.expires) s_ = Semaphore{};
  for (auto it = markers_.begin(); it != markers_.end();) {
    it = it->second.second < now_ ? markers_.erase(it) : std::next(it);
  }
}

std::string Model::marker(const std::string& id) const {
  const auto it = markers_.find(id);
  return it != markers_.end() && it->second.second >= now_ ? it->second.first : "";
}

void Model::set_later_model(bool later) { s_.later_model = later; }

Reply Model::run(const Call& c) {
  lease_ = c.lease;
  promoted_ = 0;
  if (c.op == "open") return open(c);
  if (c.op == "acquire") return acquire(c);
  if (c.op == "release") return release(c);
  if (c.op == "renew") return renew(c);
  if (c.op == "status") return status(c);
  if (c.op == "evict") return evict(c);
  if (c.op == "resize") return resize(c);
  if (c.op == "tenant") return tenant(c);
  throw std::logic_error("model: no operation " + c.op);
}

std::optional<Reply> Model::prepare(const Call& c, long long wanted) {
  if (s_.later_model) return Reply{-7LL, std::string("4"), kModel, std::string("9.9.9")};
  const long long expiry = s_.expiry.value_or(0);
  if (c.op == "open" && wanted > 0 && expiry > 0 && wanted != expiry) {
    return Reply{-6LL, std::to_string(expiry)};
  }
  const bool adopt = wanted > 0 && expiry == 0;
  const std::optional<long long> stored = s_.limit;
  const bool creates = c.op == "open" || c.op == "acquire";
  // A semaphore with no keys stays without them: only open and acquire (and resize, which
  // stores a limit) write to it.
  const bool absent = !s_.meta_exists();
  limit_ = c.limit;
  if (limit_ == 0) {
    if (!admin(c.op)) throw std::logic_error("model: limit 0 is for the tools' operations");
    limit_ = stored.value_or(0);
  } else if (!stored) {
    if (creates) s_.limit = limit_;
  } else if (*stored != limit_) {
    if (c.op == "open") return Reply{-1LL, std::to_string(*stored)};
    limit_ = *stored;
  }
  if (adopt) {
    s_.expiry = wanted;
    refresh_expiry();
  }
  const bool tool_makes = c.op == "resize" || c.op == "tenant";
  if (limit_ > 0 && (!s_.slots_field || !stored) && (!absent || creates || tool_makes)) {
    s_.slots_field = s_.top();
    if (c.op != "resize") promote(nullptr);
  }
  return std::nullopt;
}

Reply Model::open(const Call& c) {
  if (auto refused = prepare(c, c.idle_expiry)) return *refused;
  return {1LL, s_.expiry.value_or(0)};  // the expiry a handle that passed 0 follows
}

Reply Model::acquire(const Call& c) {
  if (auto refused = prepare(c, c.idle_expiry)) return *refused;
  const long long deadline = now_ + lease_;
  const bool polling = c.ticket != 0;
  const Reply none{0LL, 0LL, 0LL, 0LL, now_, -1LL};
  const bool had = !s_.entries.empty() && !c.fresh && find(c.id) != nullptr;
  if (had) {
    reap();
    if (Entry* e = find(c.id)) {
      keep_alive();
      if (e->holder()) {
        e->deadline = deadline;
        markers_.erase(c.id);
        Reply r{1LL, e->ticket, deadline, 0LL, now_};
        for (long long slot : e->slots) r.emplace_back(slot);
        return r;
      }
      if (c.units > limit_) {
        remove(c.id, "", 0);
        promote(nullptr);
        return {4LL, 0LL, 0LL, 0LL, now_, -1LL};
      }
      e->deadline = deadline;
      const long long rank = e - s_.entries.data();
      // In data model 3 its place in its tenant's queue.
      const long long place = s_.fair.on ? fair_position(*e) : rank - held_count() + 1;
      return {2LL, e->ticket, deadline, place, now_, -1LL};
    }
  } else if (polling) {
    const std::string m = marker(c.id);
    if (m == "evicted" || m == "too-large") {
      markers_.erase(c.id);
      return {m == "evicted" ? 3LL : 4LL, 0LL, 0LL, 0LL, now_, -1LL};
    }
  }
  if (c.units > limit_) return {-4LL, limit_};
  if (!had) {
    const long long count = static_cast<long long>(s_.entries.size());
    if (units_held() + c.units > limit_ || count > held_count()) reap();
  }
  const long long count = static_cast<long long>(s_.entries.size());
  const long long held = held_count();
  const bool granted = count == held && units_held() + c.units <= limit_;
  if (c.mode == "try" && !granted) return none;
  if (!granted && !polling && c.max_waiters > 0 && count - held >= c.max_waiters) {
    return {-5LL, count - held};
  }
  keep_alive();
  if (!c.tenant.empty() && !s_.fair.on) upgrade();  // the first request naming a tenant
  Entry e;
  e.id = c.id;
  e.tenant = c.tenant;
  e.deadline = deadline;
  e.info = c.info;
  e.units = c.units;
  if (granted) {
    e.slots = take_slots(c.units, nullptr);
  } else {
    e.queued = now_;
    e.client = c.client;
  }
  const long long counted = s_.counter.value_or(0) + 1;
  long long ticket = counted;
  // A new counter starts from the server's clock, above every ticket of the semaphore's
  // earlier lives, whether or not this call knows of an expiry.
  const long long lowest = counted <= 1 ? now_ * kTicketsPerMs : 1;
  if (count > 0 || ticket < lowest) {
    const long long newest = s_.entries.empty() ? 0 : s_.entries.back().ticket;
    if (ticket <= newest || ticket < lowest) ticket = std::max(newest + 1, lowest);
  }
  s_.counter = ticket;
  e.ticket = ticket;
  if (!c.fresh) markers_.erase(c.id);
  s_.entries.push_back(e);
  if (!granted && s_.fair.on) {
    enqueue(c.tenant);
    promote(nullptr);  // a tenant that becomes active may come first, and fit
    const Entry& now = *find(c.id);
    if (now.holder()) {
      Reply r{1LL, now.ticket, deadline, 0LL, now_};
      for (long long slot : now.slots) r.emplace_back(slot);
      return r;
    }
    return {2LL, ticket, deadline, static_cast<long long>(s_.queue(c.tenant).size()), now_, -1LL};
  }
  if (!granted) return {2LL, ticket, deadline, count - held + 1, now_, -1LL};
  Reply r{1LL, ticket, deadline, 0LL, now_};
  for (long long slot : e.slots) r.emplace_back(slot);
  return r;
}

Reply Model::release(const Call& c) {
  if (auto refused = prepare(c, 0)) return *refused;
  Entry* e = find(c.id);
  // A waiter leaving in the instant of its promotion, under the ticket it waited with: the
  // permit it was given passes on.
  const bool promoted = s_.fair.on && e != nullptr && c.ticket != 0 && e->ticket != c.ticket &&
                        c.how == "leaving" && e->was == c.ticket;
  if (e == nullptr || (c.ticket != 0 && e->ticket != c.ticket && !promoted)) {
    return {c.ticket != 0 && was_released(c.id, c.ticket) ? 3LL : 0LL};
  }
  if (c.how == "keep") {
    if (!e->holder()) return {0LL};
    const auto keep = static_cast<std::size_t>(c.units);
    if (e->slots.size() <= keep) return {1LL};
    std::vector<long long> given;
    while (e->slots.size() > keep) {
      given.push_back(e->slots.back());
      e->slots.pop_back();
    }
    e->units = c.units;
    pass_on(given);
    return {1LL};
  }
  const Entry gone = *e;
  if (gone.holder()) keep_receipt(gone.id, gone.ticket, c.receipt_ms);
  remove(gone.id, "", 0);
  if (!gone.holder()) {
    // A waiter that leaves lets the ones behind it in (the head may have been the only one
    // that did not fit).
    promote(nullptr);
    return {2LL};
  }
  if (s_.entries.empty() && static_cast<long long>(gone.slots.size()) == s_.top()) {
    settle();  // the only entry, holding every slot: release.lua starts over, making no key
    return {1LL};
  }
  pass_on(gone.slots);
  return {1LL};
}

Reply Model::renew(const Call& c) {
  if (auto refused = prepare(c, 0)) return *refused;
  reap();
  keep_alive();
  const long long deadline = now_ + lease_;
  Reply r{now_, deadline};
  const long long held = held_count();
  for (const auto& [id, ticket] : c.permits) {
    Entry* e = find(id);
    if (e != nullptr && e->ticket == ticket) {
      e->deadline = deadline;
      const long long place =
          s_.fair.on ? fair_position(*e) + 1 : (e - s_.entries.data()) - held + 2;
      r.emplace_back(e->holder() ? 1LL : place);
    } else {
      r.emplace_back(marker(id) == "evicted" ? -1LL : 0LL);
    }
  }
  return r;
}

Reply Model::status(const Call& c) {
  if (auto refused = prepare(c, 0)) return *refused;
  reap();
  const auto& weights = s_.fair.weights;
  Reply r{now_, limit_, s_.counter.value_or(0), static_cast<long long>(weights.size())};
  for (const auto& [tenant, weight] : weights) r.insert(r.end(), {tenant, weight});
  for (const Entry& e : s_.entries) {
    r.insert(r.end(), {e.id, e.ticket, e.deadline, e.info,
                       e.holder() ? static_cast<long long>(e.slots.size()) : e.units,
                       joined(e.slots), e.queued.value_or(-1), e.tenant});
  }
  return r;
}

Reply Model::evict(const Call& c) {
  if (auto refused = prepare(c, 0)) return *refused;
  reap();
  Entry* e = find(c.id);
  if (e == nullptr) return {marker(c.id) == "evicted" ? 3LL : 0LL};
  const Entry gone = *e;
  remove(gone.id, "evicted", std::max(gone.deadline - now_, 0LL) + lease_);
  if (!gone.holder()) {
    if (limit_ > 0) promote(nullptr);
    return {2LL};
  }
  if (limit_ > 0) pass_on(gone.slots);
  return {1LL};
}

Reply Model::resize(const Call& c) {
  if (auto refused = prepare(c, c.idle_expiry)) return *refused;
  const long long old = limit_;
  s_.limit = c.new_limit;
  limit_ = c.new_limit;
  s_.slots_field = s_.top();
  if (!s_.free.empty()) born();  // repair() makes the free set again
  if (c.new_limit < old) {
    std::vector<std::string> removed;
    for (const Entry& e : s_.entries) {
      if (!e.holder() && e.units > limit_) removed.push_back(e.id);
    }
    for (const std::string& id : removed) remove(id, "too-large", lease_);
  }
  reap();
  settle();
  return {old, c.new_limit, promoted_};
}

Entry* Model::find(const std::string& id) {
  for (Entry& e : s_.entries) {
    if (e.id == id) return &e;
  }
  return nullptr;
}

long long Model::held_count() const {
  return std::count_if(s_.entries.begin(), s_.entries.end(),
                       [](const Entry& e) { return e.holder(); });
}

long long Model::units_held() const {
  long long units = 0;
  for (const Entry& e : s_.entries) units += static_cast<long long>(e.slots.size());
  return units;
}

void Model::reap() {
  if (limit_ == 0) return;
  std::vector<Entry> expired;
  for (const Entry& e : s_.entries) {
    if (e.deadline < now_) expired.push_back(e);
  }
  std::sort(expired.begin(), expired.end(), [](const Entry& a, const Entry& b) {
    return a.deadline != b.deadline ? a.deadline < b.deadline : a.id < b.id;
  });
  std::vector<long long> freed;
  bool holders_gone = false;
  for (const Entry& e : expired) {
    freed.insert(freed.end(), e.slots.begin(), e.slots.end());
    holders_gone = holders_gone || e.holder();
    const bool head = !e.holder() && s_.queue(e.tenant).front()->id == e.id;
    s_.entries.erase(std::find_if(s_.entries.begin(), s_.entries.end(),
                                  [&](const Entry& x) { return x.id == e.id; }));
    if (s_.fair.on && !e.holder()) unqueue(e.tenant, head);
  }
  if (holders_gone) {
    pass_on(freed);
  } else {
    promote(nullptr);
  }
}

void Model::promote(std::vector<long long>* freed) {
  if (s_.fair.on) return promote_fair(freed);
  long long room = limit_ - units_held();
  auto at = static_cast<std::size_t>(held_count());
  while (room > 0 && at < s_.entries.size()) {
    Entry& w = s_.entries[at];
    if (w.units > limit_) {
      remove(w.id, "too-large", lease_);
      continue;
    }
    if (w.units > room) return;
    if (held_count() == 0) born();  // the slots hash
    w.slots = take_slots(w.units, freed);
    room -= w.units;
    ++promoted_;
    ++at;
  }
}

void Model::pass_on(std::vector<long long> slots) {
  std::vector<long long> below, above;
  for (long long slot : slots) (slot < limit_ ? below : above).push_back(slot);
  give_back(above);
  promote(&below);
  if (held_count() == 0) return settle();
  give_back(below);
}

void Model::give_back(const std::vector<long long>& slots) {
  if (s_.free.empty() && !slots.empty()) born();  // the free set
  s_.free.insert(slots.begin(), slots.end());
}

void Model::settle() {
  if (held_count() != 0) return;
  s_.free.clear();
  s_.slots_field = 0;
}

std::vector<long long> Model::take_slots(long long n, std::vector<long long>* freed) {
  std::vector<long long> slots;
  for (long long i = 0; i < n; ++i) {
    if (freed != nullptr && !freed->empty()) {
      slots.push_back(freed->back());
      freed->pop_back();
    } else if (!s_.free.empty()) {
      slots.push_back(*s_.free.begin());
      s_.free.erase(s_.free.begin());
    } else if (s_.top() < limit_) {
      slots.push_back(s_.top());
      s_.slots_field = s_.top() + 1;
    } else {
      throw std::logic_error("model: no free slot for a grant");
    }
  }
  std::sort(slots.begin(), slots.end());
  return slots;
}

void Model::remove(const std::string& id, const std::string& marker, long long keep_ms) {
  const auto at = std::find_if(s_.entries.begin(), s_.entries.end(),
                               [&](const Entry& e) { return e.id == id; });
  const bool waiter = !at->holder();
  const std::string tenant = at->tenant;
  const bool head = waiter && s_.queue(tenant).front()->id == id;
  s_.entries.erase(at);
  if (s_.fair.on && waiter) unqueue(tenant, head);
  markers_.erase(id);
  if (!marker.empty()) markers_[id] = {marker, now_ + keep_ms};
}

void Model::keep_alive() {
  const long long expiry = s_.expiry.value_or(0);
  if (expiry > 0 && (!s_.expires || *s_.expires - now_ <= std::max(expiry, lease_))) {
    refresh_expiry();
  }
}

void Model::refresh_expiry() {
  const long long e = std::max(s_.expiry.value_or(0), lease_);
  s_.expires = now_ + e + e / 2;
}

void Model::born() {
  // A key made in the keys' last millisecond lives with the others: the expiry moves on.
  if (s_.expiry.value_or(0) > 0 && (!s_.expires || *s_.expires <= now_)) refresh_expiry();
}

void Model::keep_receipt(const std::string& id, long long ticket, long long receipt_ms) {
  long long width = kReceiptBucketMs;
  while (receipt_ms > kReceiptBuckets * width) width *= 2;
  receipts_[id + ":" + std::to_string(ticket)] = ((now_ + receipt_ms) / width + 1) * width;
}

bool Model::was_released(const std::string& id, long long ticket) const {
  // Found while its bucket lasts: the search starts at the first bucket after now.
  const auto it = receipts_.find(id + ":" + std::to_string(ticket));
  return it != receipts_.end() && it->second > now_;
}

}  // namespace fairsem::model
