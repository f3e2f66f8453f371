#pragma once

// Discovery for Redis Cluster and Sentinel: asks the deployment where its commands go (CLUSTER
// SLOTS of a seed node, SENTINEL GET-MASTER-ADDR-BY-NAME of a sentinel) and keeps the answer in
// a Router, the slot map. Internal.

#include <mutex>
#include <optional>
#include <vector>

#include "fairsem/connection_options.hpp"
#include "fairsem/impl/net/router.hpp"

namespace fairsem::detail {

/// Where the commands of a Cluster or Sentinel deployment go: the master serving a slot, or
/// the master the sentinels name. The connections of one client share one Discovery.
/// Thread-safe.
class Discovery {
 public:
  /// `options` must be routed() and valid.
  explicit Discovery(ConnectionOptions options);

  /// The node for commands on `slot` (-1: any master; a cluster's first reachable seed). Asks
  /// the seed nodes (CLUSTER SLOTS) or the sentinels when the slot map does not know. Throws
  /// ConnectionError when none of them answers or none knows the answer.
  NodeAddress target(int slot);
  /// The node for commands on `slot` as far as the slot map knows it now, without asking
  /// anyone and without waiting for a question under way (then nullopt, as when not known).
  std::optional<NodeAddress> known_target(int slot);
  /// Every master, asked afresh (CLUSTER SLOTS of a seed node; under Sentinel, the one master
  /// the sentinels name). Throws as target() does.
  std::vector<NodeAddress> masters();
  /// A MOVED reply: `slot` is served by `node` from now on (ignored under Sentinel).
  void moved(int slot, const NodeAddress& node);
  /// The last answer proved wrong (its node is unreachable, not a master, read-only): ask the
  /// seeds or the sentinels again next time.
  void forget();

  /// Options for a plain connection to `node` of this deployment: the data nodes' credentials
  /// and database, the timeouts; no routing.
  ConnectionOptions node_options(const NodeAddress& node) const;
  const ConnectionOptions& options() const noexcept { return options_; }
  bool sentinel() const noexcept { return !options_.sentinel_master.empty(); }

 private:
  // The questions run under mu_: connections that need an answer wait for the one question
  // under way instead of asking their own.
  void refresh_slots();         // caller holds mu_
  NodeAddress ask_sentinels();  // caller holds mu_

  const ConnectionOptions options_;
  std::mutex mu_;
  Router router_;                       // cluster: seeded with the seeds; sentinel: empty
  std::vector<NodeAddress> sentinels_;  // the one that answered last comes first
};

}  // namespace fairsem::detail
