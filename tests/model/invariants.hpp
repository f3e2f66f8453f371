#pragma once

// What the model checker asserts after every script run, on the keys as Redis holds them:
// the promises of common.lua that hold whatever the history (check_invariants), and that the
// keys are what the model says (compare_state).

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "model_driver.hpp"
#include "semaphore_model.hpp"

namespace fairsem::model {

/// What the invariants remember of one semaphore's history.
struct History {
  long long max_ticket = 0;                             // the highest ticket seen so far
  std::set<std::pair<std::string, long long>> seen;     // every (id, ticket) seen in owner
  std::set<std::string> kept_past_shrink;               // holders above a shrunk limit
  long long max_granted = 0;                            // the highest ticket a holder had
  std::set<std::pair<std::string, long long>> granted;  // every (id, ticket) seen holding
};

/// Data model 3's waiters as the keys hold them: tenant -> (id, ticket) in ticket order.
struct FairView {
  std::map<std::string, std::vector<std::pair<std::string, long long>>> waiters;
};
FairView fair_view(const RawState& raw);

/// Data model 3 (tenant_invariants.cpp): each tenant's queue is its waiters in ticket order;
/// OWNER:tenants has one member per waiting tenant, named after its first waiter; no tenant's
/// virtual time is behind the semaphore's; the first waiter of the tenant chosen next asks for
/// more than the `free_units`.
std::string check_fair_invariants(const RawState& raw, long long free_units);
/// Every model: a new holder's ticket is above every ticket granted before (fencing tokens rise
/// in grant order, across runs), and no waiter of its tenant queued before it still waits.
std::string check_grants(const RawState& raw, History& history);
/// "" when the keys of data model 3 are what the model says.
std::string compare_fair_state(const RawState& raw, const Model& model);

/// "" when every invariant holds, else which one failed and how. `shrunk`: the run was a
/// resize to a smaller limit (its holders may hold more than the new limit until they leave).
/// Checks: units held <= limit; holders come first in ticket order; nobody waits unless the
/// head asks for more than is free; tickets strictly rise (across expiries and re-creations);
/// slots are unique and with free make up [0, meta's slots); every key has a TTL whenever an
/// expiry is stored (and wake lists and receipts always).
std::string check_invariants(const RawState& raw, History& history, bool shrunk);

/// "" when Redis holds what the model says (meta, counter, owner, time, info, slots, free, the
/// wake lists' markers of `ids`, the keys' expiry), else the first difference.
std::string compare_state(const RawState& raw, const Model& model,
                          const std::vector<std::string>& ids);

/// The keys as read, for a failure's message.
std::string show(const RawState& raw);

/// The model's state as text: equal before and after a run that changed nothing.
std::string describe(const Model& model);

}  // namespace fairsem::model
