#pragma once

// Routing for Redis Cluster and Sentinel: which node a connection talks to. Internal.

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fairsem/connection_options.hpp"

namespace fairsem::detail {

/// Number of hash slots of a Redis Cluster.
constexpr int kClusterSlots = 16384;

/// The Redis Cluster hash slot of `key`: CRC16 (XMODEM) of its hash tag — the bytes between
/// the first '{' and the next '}', when there are any — or of the whole key, mod 16384.
int key_slot(std::string_view key) noexcept;

/// A MOVED or ASK error reply, taken apart.
struct Redirect {
  enum class Kind { moved, ask } kind = Kind::moved;
  int slot = -1;
  NodeAddress node;
};

/// Parses "MOVED 3999 127.0.0.1:6381" / "ASK 3999 [::1]:6381"; nullopt for any other reply.
/// `from`: the node that sent it, whose host stands in for an empty one (":6381").
std::optional<Redirect> parse_redirect(std::string_view error, const NodeAddress& from);

/// Where the commands of a Cluster or Sentinel deployment go: the master serving a slot, or
/// the master the sentinels name. The connections of one semaphore share one Router.
/// Thread-safe.
class Router {
 public:
  /// `options` must be routed() and valid.
  explicit Router(ConnectionOptions options);

  /// The node for commands on `slot` (-1: any master; a cluster's first reachable seed). Asks
  /// the seed nodes (CLUSTER SLOTS) or the sentinels when nothing is known. Throws
  /// ConnectionError when none of them answers or none knows the answer.
  NodeAddress target(int slot);
  /// A MOVED reply: `slot` is served by `node` from now on.
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
  // The refresh and the sentinel question run under mu_: connections that need the map wait
  // for the one refresh under way instead of starting their own.
  void refresh_slots();         // caller holds mu_
  NodeAddress ask_sentinels();  // caller holds mu_
  /// Index of `node` in `nodes`, added at the end when new.
  static std::int32_t node_index(std::vector<NodeAddress>& nodes, const NodeAddress& node);

  const ConnectionOptions options_;
  std::mutex mu_;
  std::vector<NodeAddress> nodes_;      // the seeds, then the last map's masters and MOVEDs
  std::size_t seed_count_ = 0;          // how many of nodes_ are seeds
  std::vector<std::int32_t> owner_;     // slot -> index in nodes_, -1 unknown (cluster)
  std::optional<NodeAddress> master_;   // sentinel: the master last named
  std::vector<NodeAddress> sentinels_;  // the one that answered last comes first
};

}  // namespace fairsem::detail
