#pragma once

// A pure reference model of one semaphore as its scripts promise it (src/lua/semaphore/
// common.lua: the data model, the keys, the replies; each <op>.lua: its arguments): what every
// operation replies and how it leaves the semaphore, by the server's clock. No Redis here: the
// model checker (model_checker_test.cpp) runs the real scripts beside it and compares.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace fairsem::model {

/// One element of a script's reply: an integer or a string (the model's replies are flat).
using Value = std::variant<long long, std::string>;
using Reply = std::vector<Value>;
std::string show(const Reply& reply);

/// An entry of owner: a holder (it has slots) or a waiter.
struct Entry {
  std::string id;
  long long ticket = 0;
  long long deadline = 0;           // time's score
  long long units = 1;              // a waiter's {units} (1 when absent), a holder's slot count
  std::vector<long long> slots;     // ascending; empty: a waiter
  std::string info;                 // info's field ID
  std::optional<long long> queued;  // info's {queued}ID (a waiter that queued)
  std::string client;               // info's {inbox}ID ("" none; a waiter only)
  std::string tenant;               // info's {tenant}ID ("" the default tenant)
  std::optional<long long> was;     // info's {was}ID: the ticket a promoted waiter waited under
  bool holder() const { return !slots.empty(); }
};

/// The arguments of one script run, as the library sends them (ARGV 2 on).
struct Call {
  std::string op;  // open acquire release renew status evict resize tenant
  long long limit = 1;
  long long lease = 1000;
  // acquire
  std::string id, mode = "queue", info, client, tenant;  // (tenant: acquire's and tenant's)
  long long ticket = 0, units = 1, max_waiters = 0, idle_expiry = 0;  // (open, resize too)
  bool fresh = false;
  // release: how "" | "leaving" | "keep" (keep K = units); receipt_ms
  std::string how;
  long long receipt_ms = 0;
  // renew: (id, ticket) pairs
  std::vector<std::pair<std::string, long long>> permits;
  // resize
  long long new_limit = 1;
  // tenant
  long long weight = 1;
};

/// Data model 3 (src/lua/semaphore/tenants.lua): the tenants' virtual times and weights. The
/// queues (OWNER:queue:T) and the members of OWNER:tenants follow from the entries.
struct Fair {
  bool on = false;                       // meta's `model` is 3
  std::optional<double> vtime;           // meta's `vtime` (absent before the first fair grant)
  std::map<std::string, double> active;  // tenant with waiters -> its virtual time
  std::map<std::string, double> idle;    // OWNER:idle
  std::vector<std::pair<std::string, long long>> weights;  // META:weights, in HSET order
  long long weight(const std::string& tenant) const;
  /// OWNER:tenants' member for a tenant whose first waiter has `ticket`.
  static std::string member(long long ticket, const std::string& tenant);
  /// A virtual time as the scripts write it (%.17g).
  static std::string vnum(double x);
};

/// The semaphore's keys as the model has them. Every key of the semaphore but the wake lists
/// and receipts expires at `expires` when `expiry` is stored.
struct Semaphore {
  // meta
  std::optional<long long> limit, slots_field, expiry, expires;
  bool later_model = false;  // meta's `model` is 3 (a later data model)
  std::optional<long long> counter;
  std::vector<Entry> entries;  // owner in ticket order
  std::set<long long> free;
  Fair fair;
  long long top() const { return slots_field.value_or(0); }
  bool meta_exists() const { return limit || slots_field || expiry || expires || later_model; }
  /// The waiters of `tenant` in ticket order (data model 3).
  std::vector<const Entry*> queue(const std::string& tenant) const;
  bool exists() const { return meta_exists() || counter || !entries.empty(); }
};

class Model {
 public:
  explicit Model(long long now) : now_(now) {}

  /// The server's clock moves on to `now` (ms); keys whose time is up expire.
  void set_clock(long long now);
  long long now() const { return now_; }

  /// Runs `call` as its script would: returns the reply and updates the state.
  Reply run(const Call& call);

  const Semaphore& semaphore() const { return s_; }
  /// The marker (EVICTED, TOO-LARGE) in id's own wake list, "" when none.
  std::string marker(const std::string& id) const;
  const std::map<std::string, std::pair<std::string, long long>>& markers() const {
    return markers_;
  }
  /// Sets or clears meta's `model` (a later data model's semaphore, or back to this one).
  void set_later_model(bool later);

  /// A new counter's first ticket is the server's clock (ms) times this: see common.lua's
  /// "Tickets go on across an expiry".
  static constexpr long long kTicketsPerMs = 1024;

 private:
  // prepare(): a refusal, or nothing. `wanted`: open's and acquire's IDLE_EXPIRY.
  std::optional<Reply> prepare(const Call& c, long long wanted);
  Reply open(const Call& c);
  Reply acquire(const Call& c);
  Reply release(const Call& c);
  Reply renew(const Call& c);
  Reply status(const Call& c);
  Reply evict(const Call& c);
  Reply resize(const Call& c);
  Reply tenant(const Call& c);  // tenant_model.cpp, with the rest of data model 3

  // Data model 3 (tenant_model.cpp).
  void upgrade();
  void enqueue(const std::string& tenant);  // after a waiter of `tenant` joined owner
  void unqueue(const std::string& tenant, bool was_head);  // after a waiter of it left owner
  void promote_fair(std::vector<long long>* freed);
  long long fair_position(const Entry& e) const;
  void sort_entries();

  Entry* find(const std::string& id);
  long long held_count() const;
  long long units_held() const;
  void reap();
  void promote(std::vector<long long>* freed);
  void pass_on(std::vector<long long> slots);
  void give_back(const std::vector<long long>& slots);
  void settle();
  std::vector<long long> take_slots(long long n, std::vector<long long>* freed);
  void remove(const std::string& id, const std::string& marker, long long keep_ms);
  void keep_alive();
  void refresh_expiry();
  void born();
  void keep_receipt(const std::string& id, long long ticket, long long receipt_ms);
  bool was_released(const std::string& id, long long ticket) const;

  long long now_;
  Semaphore s_;
  // The run's state: the limit it follows and its lease.
  long long limit_ = 0, lease_ = 0;
  long long promoted_ = 0;
  // id -> (marker, kept until: ms of the server clock, inclusive)
  std::map<std::string, std::pair<std::string, long long>> markers_;
  // "ID:TICKET" -> when its receipts bucket expires
  std::map<std::string, long long> receipts_;
};

}  // namespace fairsem::model
