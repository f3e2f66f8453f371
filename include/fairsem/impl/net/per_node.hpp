#pragma once

// What a Client keeps one of per node of its deployment, each made on first need (a Waker, a
// renewal lane): the node that serves a cluster slot now, as the slot map knows it, named by
// its endpoint; "" for the only node outside a Cluster (a single server, or the one master
// through Sentinel). Guarded by its owner's mutex; what makes a node's entry unused (and so
// dropped) is its owner's. Internal.

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "fairsem/impl/net/discovery.hpp"

namespace fairsem::detail {

template <class T>
class PerNode {
 public:
  using Map = std::unordered_map<std::string, std::shared_ptr<T>>;

  /// `discovery`: where a routed deployment's connections go (null standalone).
  explicit PerNode(std::shared_ptr<Discovery> discovery)
      : discovery_(std::move(discovery)), per_slot_(discovery_ && !discovery_->sentinel()) {}

  /// The node that serves `slot` now: "" outside a Cluster (and for slot -1); nullopt when the
  /// slot map does not know it now (never waits for it).
  std::optional<std::string> route(int slot) const {
    if (!per_slot_ || slot < 0) return std::string();
    if (auto node = discovery_->known_target(slot)) return node->endpoint();
    return std::nullopt;
  }

  /// The entry of `node`: empty until its owner makes one.
  std::shared_ptr<T>& operator[](const std::string& node) { return nodes_[node]; }
  typename Map::iterator begin() noexcept { return nodes_.begin(); }
  typename Map::iterator end() noexcept { return nodes_.end(); }
  typename Map::iterator erase(typename Map::iterator it) { return nodes_.erase(it); }
  void erase(const std::string& node) { nodes_.erase(node); }
  void clear() noexcept { nodes_.clear(); }

 private:
  const std::shared_ptr<Discovery> discovery_;
  const bool per_slot_;  // a Cluster: a node per slot (Sentinel: one master serves every slot)
  Map nodes_;
};

}  // namespace fairsem::detail
