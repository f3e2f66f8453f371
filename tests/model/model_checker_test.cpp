// The model checker: long random sequences of semaphore operations from several simulated
// clients (mixed limits, leases, idle expiries, queue bounds), lost replies (a call run twice)
// and the server's clock moved on past leases and expiries, clients of tenants and of none
// (the semaphore upgraded to data model 3 mid-sequence) and tenants' weights, run with the
// real scripts against
// a real redis-server and, beside them, with the reference model (semaphore_model.hpp). After
// every script run: the reply equals the model's, the keys hold what the model says, and the
// invariants (invariants.hpp) hold. RapidCheck generates the sequences and shrinks a failing
// one; it prints the seed and the reproduce string (RC_PARAMS="reproduce=...").
// Budget: FAIRSEM_MODEL_CASES sequences (default 200), or RC_PARAMS="max_success=N".

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/state.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "invariants.hpp"
#include "model_driver.hpp"
#include "semaphore_model.hpp"

namespace {

using fairsem::model::Call;
using fairsem::model::Driver;
using fairsem::model::History;
using fairsem::model::Model;

struct Client {
  long long limit = 1, lease = 1000, idle_expiry = 0, max_waiters = 0, receipt_ms = 1000;
  std::string tenant;  // SemaphoreOptions::tenant ("" the default)
};

struct Permit {
  std::string id;
  std::size_t client = 0;
  long long ticket = 0, units = 1;
};

struct State {
  Model model;
  std::vector<Client> clients;
  std::vector<Permit> permits;
  int next_id = 0;
  std::optional<Call> last;  // the last script call: run again after a "lost reply"
  bool later_model = false;
  // Per client: the idle expiry its open found stored, which a handle opened with 0 passes on
  // to its acquires and resizes (FairSemaphore does since open replies it).
  std::vector<long long> followed = std::vector<long long>(3, 0);

  long long expiry(std::size_t client) const {
    return clients[client].idle_expiry > 0 ? clients[client].idle_expiry : followed[client];
  }

  std::vector<std::string> ids() const {
    std::vector<std::string> out;
    for (const Permit& p : permits) out.push_back(p.id);
    return out;
  }
};

struct Sut {
  Driver& driver;
  History history;
  std::map<std::string, long long>* seen = nullptr;  // replies by operation and first element
};

enum class Kind {
  acquire,
  poll,
  release,
  renew,
  evict,
  resize,
  status,
  open,
  advance,
  retry,
  gate,
  weight
};

struct Step : rc::state::Command<State, Sut> {
  Kind kind = Kind::status;
  std::size_t client = 0, permit = 0;
  long long units = 1, value = 0;  // value: keep K, a new limit, ms to move the clock on
  std::string mode = "queue", how;
  bool admin = false;   // status, evict, resize as a tool that passes limit 0
  bool chosen = false;  // acquire with the client's own permit id (SemaphoreOptions::permit_id)

  explicit Step(const State& s) {
    kind = *rc::gen::weightedElement<Kind>({{20, Kind::acquire},
                                            {10, Kind::poll},
                                            {14, Kind::release},
                                            {6, Kind::renew},
                                            {5, Kind::evict},
                                            {3, Kind::resize},
                                            {4, Kind::status},
                                            {3, Kind::open},
                                            {12, Kind::advance},
                                            {6, Kind::retry},
                                            // set once in a while, soon cleared
                                            {s.later_model ? 30u : 1u, Kind::gate},
                                            {3, Kind::weight}});
    const bool need_permit = kind == Kind::poll || kind == Kind::release;
    if ((need_permit && s.permits.empty()) || (kind == Kind::retry && !s.last)) {
      kind = Kind::acquire;
    }
    client = *rc::gen::inRange<std::size_t>(0, s.clients.size());
    if (!s.permits.empty()) permit = *rc::gen::inRange<std::size_t>(0, s.permits.size());
    units = *rc::gen::weightedElement<long long>({{6, 1}, {3, 2}, {1, 3}});
    mode = *rc::gen::weightedElement<std::string>({{3, "queue"}, {1, "try"}});
    how = *rc::gen::weightedElement<std::string>(
        {{8, ""}, {3, "ticket0"}, {3, "leaving"}, {3, "keep"}});
    admin = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    chosen = kind == Kind::acquire && *rc::gen::weightedElement<bool>({{4, false}, {1, true}});
    if (kind == Kind::release) value = *rc::gen::inRange<long long>(1, 3);
    if (kind == Kind::resize) value = *rc::gen::inRange<long long>(1, 5);
    if (kind == Kind::weight) {
      value = *rc::gen::weightedElement<long long>({{1, 1}, {2, 2}, {2, 3}});
      how = *rc::gen::element<std::string>("", "a", "b");  // the tenant
    }
    if (kind == Kind::advance) {
      value = *rc::gen::weightedElement<long long>(
          {{4, 1000}, {3, 2000}, {2, 3000}, {1, 5000}, {1, 10000}});
      // Now and then to the keys' last millisecond, when it is a whole second (the clock's
      // step): a run there must keep every key it makes with the others.
      const auto& expires = s.model.semaphore().expires;
      if (expires && *expires > s.model.now() && (*expires - s.model.now()) % 1000 == 0 &&
          *rc::gen::weightedElement<bool>({{1, true}, {1, false}})) {
        value = *expires - s.model.now();
      }
    }
    if (kind == Kind::evict &&
        (s.permits.empty() || !*rc::gen::weightedElement<bool>({{5, true}, {1, false}}))) {
      permit = s.permits.size();  // an id nobody has
    }
  }

  void checkPreconditions(const State& s) const override {
    RC_PRE(client < s.clients.size());
    if (kind == Kind::poll || kind == Kind::release) RC_PRE(permit < s.permits.size());
    if (kind == Kind::evict) RC_PRE(permit <= s.permits.size());
    if (kind == Kind::retry) RC_PRE(s.last.has_value());
  }

  /// The script call this step makes in state `s` (none for advance and gate).
  Call call(const State& s) const {
    const Client& c = s.clients[client];
    Call k;
    k.limit = c.limit;
    k.lease = c.lease;
    switch (kind) {
      case Kind::acquire:
      case Kind::poll: {
        const bool polling = kind == Kind::poll;
        const Permit* p = polling ? &s.permits[permit] : nullptr;
        const Client& owner = polling ? s.clients[p->client] : c;
        k.op = "acquire";
        k.limit = owner.limit;
        k.lease = owner.lease;
        k.id = polling  ? p->id
               : chosen ? "chosen" + std::to_string(client)
                        : "p" + std::to_string(s.next_id);
        k.mode = polling ? "queue" : mode;
        k.units = polling ? p->units : units;
        k.ticket = polling ? p->ticket : 0;
        k.info = "c" + std::to_string(polling ? p->client : client);
        k.client = k.mode == "queue" ? "inbox" + k.info : "";
        k.max_waiters = owner.max_waiters;
        k.idle_expiry = s.expiry(polling ? p->client : client);
        k.fresh = !polling && !chosen;  // a random id is fresh, a chosen one never
        k.tenant = owner.tenant;
        return k;
      }
      case Kind::release: {
        const Permit& p = s.permits[permit];
        const Client& owner = s.clients[p.client];
        k.op = "release";
        k.limit = owner.limit;
        k.lease = owner.lease;
        k.id = p.id;
        k.ticket = how == "ticket0" ? 0 : p.ticket;
        k.receipt_ms = owner.receipt_ms;
        k.how = how == "ticket0" ? "" : how;
        k.units = value;
        return k;
      }
      case Kind::renew:
        k.op = "renew";
        for (const Permit& p : s.permits) {
          if (p.client == client) k.permits.emplace_back(p.id, p.ticket);
        }
        return k;
      case Kind::evict:
        k.op = "evict";
        k.id = permit < s.permits.size() ? s.permits[permit].id : "nobody";
        break;
      case Kind::resize:
        k.op = "resize";
        k.new_limit = value;
        k.idle_expiry = admin ? 0 : s.expiry(client);  // SemaphoreAdmin has none
        break;
      case Kind::status:
        k.op = "status";
        break;
      case Kind::weight:
        k.op = "tenant";
        k.tenant = how;
        k.weight = value;
        break;
      case Kind::open:
        k.op = "open";
        k.info = "c" + std::to_string(client);  // (not sent: whose open it is)
        k.idle_expiry = s.expiry(client);
        return k;
      default:
        throw std::logic_error("no call");
    }
    if (admin) k.limit = 0;
    return k;
  }

  /// Runs this step on the model: the call made (if any) and the model's reply.
  std::optional<std::pair<Call, fairsem::model::Reply>> step(State& s) const {
    if (kind == Kind::advance) {
      s.model.set_clock(s.model.now() + value);
      return std::nullopt;
    }
    if (kind == Kind::gate) {
      s.later_model = !s.later_model;
      s.model.set_later_model(s.later_model);
      return std::nullopt;
    }
    Call k = kind == Kind::retry ? *s.last : call(s);
    if (kind == Kind::retry) k.fresh = false;  // the library sends FRESH 0 when it runs again
    const fairsem::model::Reply r = s.model.run(k);
    if (kind == Kind::acquire) ++s.next_id;
    if (k.op == "acquire" &&
        (r[0] == fairsem::model::Value(1LL) || r[0] == fairsem::model::Value(2LL))) {
      const long long ticket = std::get<long long>(r[1]);
      bool known = false;
      for (Permit& p : s.permits) {
        if (p.id == k.id) {
          p.ticket = ticket;
          known = true;
        }
      }
      // The client whose permit it is, from its owner info ("c0"): a retry's own is another.
      if (!known) s.permits.push_back({k.id, std::stoul(k.info.substr(1)), ticket, k.units});
    }
    if (k.op == "open" && r[0] == fairsem::model::Value(1LL) && std::get<long long>(r[1]) > 0) {
      const std::size_t who = std::stoul(k.info.substr(1));
      if (s.clients[who].idle_expiry == 0) s.followed[who] = std::get<long long>(r[1]);
    }
    if (kind != Kind::retry) s.last = k;
    return std::make_pair(k, r);
  }

  void apply(State& s) const override { (void)step(s); }

  void run(const State& s0, Sut& sut) const override {
    State s = s0;
    const auto made = step(s);
    if (kind == Kind::advance) sut.driver.set_clock(s.model.now());
    if (kind == Kind::gate) sut.driver.set_later_model(s.later_model, s.model.semaphore().fair.on);
    bool shrunk = false;
    if (made) {
      const auto& [k, expected] = *made;
      // A negative first element is a refusal (renew's and status' is the clock).
      const bool refusal = std::get<long long>(expected.at(0)) < 0;
      const auto before = refusal ? sut.driver.dump() : std::map<std::string, std::string>{};
      const fairsem::model::Reply got = sut.driver.run(k);
      if (sut.seen != nullptr) {
        const bool clock =
            (k.op == "renew" || k.op == "status") && std::get<long long>(got.at(0)) > 0;
        ++(*sut.seen)[k.op + (kind == Kind::retry ? " (again) " : " ") +
                      (clock ? std::string("[now]") : fairsem::model::show({got.at(0)}))];
      }
      if (fairsem::model::show(got) != fairsem::model::show(expected)) {
        std::ostringstream args;
        for (const std::string& a : Driver::argv(k)) args << a << ' ';
        RC_FAIL("the reply to " + args.str() + "is " + fairsem::model::show(got) +
                ", the model's " + fairsem::model::show(expected));
      }
      if (refusal && fairsem::model::describe(s0.model) == fairsem::model::describe(s.model) &&
          sut.driver.dump() != before) {
        RC_FAIL("a refusal writes nothing: " + k.op + " replied " + fairsem::model::show(got) +
                " and changed the keys");
      }
      shrunk = k.op == "resize" && got.size() == 3 &&
               std::get<long long>(got[1]) < std::get<long long>(got[0]);
    }
    const fairsem::model::RawState raw = sut.driver.read(s.ids());
    if (made) {
      const std::string broken = fairsem::model::check_invariants(raw, sut.history, shrunk);
      if (!broken.empty()) RC_FAIL("invariant: " + broken + "\nkeys: " + fairsem::model::show(raw));
    }
    const std::string differs = fairsem::model::compare_state(raw, s.model, s.ids());
    if (!differs.empty()) {
      RC_FAIL("state: " + differs + "\nkeys: " + fairsem::model::show(raw) +
              "\nmodel: " + fairsem::model::describe(s.model));
    }
  }

  void show(std::ostream& os) const override {
    static const char* const names[] = {"acquire", "poll", "release", "renew", "evict", "resize",
                                        "status",  "open", "advance", "retry", "gate",  "tenant"};
    os << names[static_cast<int>(kind)];
    switch (kind) {
      case Kind::acquire:
        os << " client " << client << ' ' << mode << " units " << units
           << (chosen ? " (its chosen id)" : "");
        break;
      case Kind::poll:
        os << " permit " << permit;
        break;
      case Kind::release:
        // (plain: with its ticket, as Permit::release() sends it)
        os << " permit " << permit << (how.empty() ? "" : " ")
           << (how == "ticket0" ? "ticket 0" : how);
        if (how == "keep") os << ' ' << value;
        break;
      case Kind::renew:
      case Kind::open:
        os << " client " << client;
        break;
      case Kind::evict:
        os << " permit " << permit << (admin ? " (limit 0)" : "");
        break;
      case Kind::resize:
        os << " to " << value << (admin ? " (limit 0)" : "");
        break;
      case Kind::status:
        os << (admin ? " (limit 0)" : "");
        break;
      case Kind::advance:
        os << " " << value << " ms";
        break;
      case Kind::weight:
        os << " '" << how << "' weight " << value << (admin ? " (limit 0)" : "");
        break;
      default:
        break;
    }
  }
};

std::ostream& operator<<(std::ostream& os, const Client& c) {
  return os << "{limit " << c.limit << ", lease " << c.lease << " ms, idle_expiry " << c.idle_expiry
            << " ms, max_waiters " << c.max_waiters << ", receipt " << c.receipt_ms
            << " ms, tenant '" << c.tenant << "'}";
}

rc::Gen<Client> client_gen(long long limit) {
  return rc::gen::exec([limit] {
    Client c;
    c.limit = *rc::gen::weightedElement<long long>({{4, limit}, {1, limit + 1}});
    // With 2 s and 4 s, `expires` (1.5 max(expiry, lease) after a whole second) falls on a
    // whole second too: runs land on the keys' last millisecond.
    c.lease = *rc::gen::element<long long>(1000LL, 1500LL, 2000LL, 2500LL, 3000LL);
    c.idle_expiry = *rc::gen::element<long long>(0LL, 0LL, 2500LL, 4000LL, 5500LL);
    c.max_waiters = *rc::gen::element<long long>(0LL, 0LL, 0LL, 2LL);
    // Above 65,536 ms the receipts' buckets are wider (common.lua, Receipts).
    c.receipt_ms = *rc::gen::element(c.lease, 5000LL, 70000LL);
    // Mostly tenants, some clients of none: a sequence upgrades when a tenant first asks.
    c.tenant = *rc::gen::element<std::string>("", "", "a", "b");
    return c;
  });
}

/// The number of sequences: RC_PARAMS' max_success when given, else FAIRSEM_MODEL_CASES, else
/// CI's budget.
rc::detail::TestParams params() {
  rc::detail::TestParams p = rc::detail::configuration().testParams;
  const char* rc_params = std::getenv("RC_PARAMS");
  if (rc_params != nullptr && std::string(rc_params).find("max_success") != std::string::npos) {
    return p;
  }
  const char* cases = std::getenv("FAIRSEM_MODEL_CASES");
  p.maxSuccess = cases != nullptr ? std::atoi(cases) : 200;
  return p;
}

TEST(ModelCheckerTest, EveryScriptRunMatchesTheModelAndKeepsTheInvariants) {
  Driver driver;
  // FAIRSEM_MODEL_STATS=1: how often each operation got each kind of reply (its first element).
  std::map<std::string, long long> seen;
  const bool stats = std::getenv("FAIRSEM_MODEL_STATS") != nullptr;
  const auto property = [&driver, &seen, stats] {
    const long long limit = *rc::gen::inRange<long long>(1, 5);
    const auto clients = *rc::gen::container<std::vector<Client>>(3, client_gen(limit));
    State initial{Model(driver.new_case()), clients, {}, 0, std::nullopt, false};
    Sut sut{driver, {}, stats ? &seen : nullptr};
    std::ostringstream shown;
    for (const Client& c : clients) shown << c << ' ';
    RC_LOG() << "clients " << shown.str() << '\n';
    rc::state::check(initial, sut, rc::state::gen::execOneOfWithArgs<Step>());
  };
  rc::detail::TestMetadata metadata;
  metadata.id = "ModelCheckerTest/EveryScriptRunMatchesTheModelAndKeepsTheInvariants";
  metadata.description = "semaphore scripts against the model";
  const auto result =
      rc::detail::checkProperty(rc::detail::toProperty(property), metadata, params());
  for (const auto& [reply, count] : seen) std::cout << reply << ": " << count << "\n";
  if (!result.template is<rc::detail::SuccessResult>()) {
    std::ostringstream ss;
    rc::detail::printResultMessage(result, ss);
    FAIL() << ss.str() << "\n(the server: " << driver.server_name()
           << "; RapidCheck prints RC_PARAMS=\"reproduce=...\" as the program exits)";
  }
}

}  // namespace
