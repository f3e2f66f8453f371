#pragma once

// The slot map of a Redis Cluster or Sentinel deployment: which node serves each hash slot, as
// last learned. Pure bookkeeping: it never talks to a server (discovery.hpp does, and fills it
// in). Internal.

#include <cstdint>
#include <optional>
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

/// Slots `first` to `last` (both included) are served by `node`.
struct SlotRange {
  int first = 0;
  int last = kClusterSlots - 1;
  NodeAddress node;
};

/// Which node serves each hash slot: learned from a whole map (replace(): a CLUSTER SLOTS
/// reply, or the one master a sentinel names) and from MOVED replies (moved()). It also keeps
/// the nodes worth asking for a new map (nodes()). Not thread-safe: Discovery guards it.
class Router {
 public:
  /// `seeds`: the nodes known before any map (a cluster's seed nodes; none for Sentinel).
  /// Duplicates count once.
  explicit Router(const std::vector<NodeAddress>& seeds = {});

  /// The node serving `slot`, or, for slot -1 (a keyless command: any node), the first node of
  /// the map in slot order, else the first seed. nullopt when not known (and for a slot outside
  /// 0 to 16383).
  std::optional<NodeAddress> lookup(int slot) const;
  /// A MOVED reply: `slot` is served by `node` from now on. A slot outside 0 to 16383 is
  /// ignored.
  void moved(int slot, const NodeAddress& node);
  /// A whole new map: the slots of `ranges` go to their nodes, every other slot is unknown,
  /// and the nodes named only by earlier maps or MOVEDs are no longer in nodes(). Throws
  /// InvalidArgument, leaving the map as it was, for a range outside 0 to 16383 or backwards.
  void replace(const std::vector<SlotRange>& ranges);
  /// The map proved wrong (a node unreachable, not a master): every slot unknown. nodes() keeps
  /// every node heard of, so all of them can be asked for the next map.
  void forget();

  /// The nodes serving at least one slot (a cluster's masters, as far as the map knows), each
  /// once, in slot order.
  std::vector<NodeAddress> masters() const;
  /// The nodes to ask for a map: the seeds first, then those the last map and MOVEDs named.
  const std::vector<NodeAddress>& nodes() const noexcept { return nodes_; }

 private:
  /// Index of `node` in `nodes`, added at the end when new.
  static std::int32_t node_index(std::vector<NodeAddress>& nodes, const NodeAddress& node);

  std::vector<NodeAddress> nodes_;   // the seeds, then the last map's nodes and MOVEDs
  std::size_t seed_count_ = 0;       // how many of nodes_ are seeds
  std::vector<std::int32_t> owner_;  // slot -> index in nodes_, -1 unknown
};

}  // namespace fairsem::detail
