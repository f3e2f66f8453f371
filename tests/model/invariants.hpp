#pragma once

// What the model checker asserts after every script run, on the keys as Redis holds them:
// the promises of common.lua that hold whatever the history (check_invariants), and that the
// keys are what the model says (compare_state).

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "model_driver.hpp"
#include "semaphore_model.hpp"

namespace fairsem::model {

/// What the invariants remember of one semaphore's history.
struct History {
  long long max_ticket = 0;                          // the highest ticket seen so far
  std::set<std::pair<std::string, long long>> seen;  // every (id, ticket) seen in owner
  std::set<std::string> kept_past_shrink;            // holders above a shrunk limit
};

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
