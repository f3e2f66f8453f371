#pragma once

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/net/discovery.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>

#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/protocol/reply.hpp"
#include "fairsem/impl/text.hpp"

namespace fairsem::detail {

namespace discovery_helpers {

/// Opens a short-lived connection for a question to a seed node or a sentinel: one attempt,
/// so that a dead node costs one connect timeout before the next is tried.
FAIRSEM_INLINE Connection question_connection(ConnectionOptions options) {
  options.reconnect_attempts = 1;
  return Connection(std::move(options));
}

/// The seeds of a cluster: the node of the URL, then the other seeds it lists; none for
/// Sentinel, whose master is only ever the one the sentinels name.
FAIRSEM_INLINE std::vector<NodeAddress> seeds_of(const ConnectionOptions& options) {
  std::vector<NodeAddress> seeds;
  if (!options.cluster) return seeds;
  seeds.push_back(NodeAddress{options.host, options.port});
  seeds.insert(seeds.end(), options.seeds.begin(), options.seeds.end());
  return seeds;
}

/// The slot ranges of a CLUSTER SLOTS reply from `from` (whose host stands in for an empty
/// one); throws ProtocolError for a malformed reply.
FAIRSEM_INLINE std::vector<SlotRange> parse_cluster_slots(const Reply& reply,
                                                          const NodeAddress& from) {
  std::vector<SlotRange> ranges;
  for (const Reply& range : expect_array(reply, "the CLUSTER SLOTS reply")) {
    const auto& fields = expect_array(range, "a CLUSTER SLOTS range", 3);
    const long long first = expect_integer(fields[0], "a CLUSTER SLOTS range start");
    const long long last = expect_integer(fields[1], "a CLUSTER SLOTS range end");
    const auto& master = expect_array(fields[2], "a CLUSTER SLOTS master", 2);
    const std::string& host = expect_string(master[0], "a CLUSTER SLOTS master host");
    const long long port = expect_integer(master[1], "a CLUSTER SLOTS master port");
    if (first < 0 || last >= kClusterSlots || first > last || port < 1 || port > 65535) {
      throw ProtocolError(fmt::format("fairsem: CLUSTER SLOTS from {} names slots {}-{} at port {}",
                                      from.endpoint(), first, last, port));
    }
    ranges.push_back(SlotRange{
        static_cast<int>(first), static_cast<int>(last),
        NodeAddress{host.empty() || host == "?" ? from.host : host, static_cast<int>(port)}});
  }
  return ranges;
}

/// Throws when no node answered: an AuthError if one of them refused the credentials (they are
/// what needs fixing, and reconnecting does not retry them), else a ConnectionError.
[[noreturn]] FAIRSEM_INLINE void fail(bool refused, const std::string& message) {
  if (refused) throw AuthError(message);
  throw ConnectionError(message);
}

}  // namespace discovery_helpers

FAIRSEM_INLINE Discovery::Discovery(ConnectionOptions options)
    : options_(std::move(options)),
      router_(discovery_helpers::seeds_of(options_)),
      sentinels_(options_.sentinels) {}

FAIRSEM_INLINE ConnectionOptions Discovery::node_options(const NodeAddress& node) const {
  ConnectionOptions o = options_;
  o.cluster = false;
  o.seeds.clear();
  o.sentinel_master.clear();
  o.sentinels.clear();
  o.sentinel_user.clear();
  o.sentinel_password.clear();
  o.unix_path.clear();
  o.host = node.host;
  o.port = node.port;
  return o;
}

FAIRSEM_INLINE NodeAddress Discovery::target(int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto node = router_.lookup(slot)) return *std::move(node);
  if (sentinel()) {
    // One master serves every slot.
    router_.replace({SlotRange{0, kClusterSlots - 1, ask_sentinels()}});
  } else {
    refresh_slots();
  }
  if (auto node = router_.lookup(slot)) return *std::move(node);
  throw ConnectionError(fmt::format(
      "fairsem: no master serves hash slot {} in the cluster of {} (the cluster is not fully "
      "set up, or lost that shard)",
      slot, options_.endpoint()));
}

FAIRSEM_INLINE std::vector<NodeAddress> Discovery::masters() {
  std::lock_guard<std::mutex> lock(mu_);
  if (sentinel()) {
    router_.replace({SlotRange{0, kClusterSlots - 1, ask_sentinels()}});
  } else {
    refresh_slots();
  }
  return router_.masters();
}

FAIRSEM_INLINE std::optional<NodeAddress> Discovery::known_target(int slot) {
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return std::nullopt;
  return router_.lookup(slot);
}

FAIRSEM_INLINE void Discovery::moved(int slot, const NodeAddress& node) {
  if (sentinel()) return;
  std::lock_guard<std::mutex> lock(mu_);
  router_.moved(slot, node);
}

FAIRSEM_INLINE void Discovery::forget() {
  std::lock_guard<std::mutex> lock(mu_);
  router_.forget();
}

FAIRSEM_INLINE void Discovery::refresh_slots() {
  std::string errors;
  bool refused = false;  // a node refused the credentials
  // Every node heard of may answer: the seeds first, then those the last map named. The new
  // map drops the nodes gone from it, so that dead ones are not asked again and again.
  const std::vector<NodeAddress> candidates = router_.nodes();
  for (const NodeAddress& node : candidates) {
    try {
      Connection conn = discovery_helpers::question_connection(node_options(node));
      router_.replace(
          discovery_helpers::parse_cluster_slots(conn.command({"CLUSTER", "SLOTS"}), node));
      return;
    } catch (const Error& e) {
      refused = refused || dynamic_cast<const AuthError*>(&e) != nullptr;
      errors += fmt::format("{}{}", errors.empty() ? "" : "; ", e.what());
    }
  }
  discovery_helpers::fail(refused,
                          fmt::format("fairsem: no node of the cluster of {} told its slot map: {}",
                                      options_.endpoint(), errors));
}

FAIRSEM_INLINE NodeAddress Discovery::ask_sentinels() {
  std::string errors;
  bool refused = false;  // a sentinel refused the credentials
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    const NodeAddress sentinel = sentinels_[i];
    try {
      ConnectionOptions o = node_options(sentinel);
      o.user = options_.sentinel_user;
      o.password = options_.sentinel_password;
      o.db = 0;
      Connection conn = discovery_helpers::question_connection(std::move(o));
      const Reply reply =
          conn.command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options_.sentinel_master});
      if (reply.is_nil()) {
        errors += fmt::format("{}sentinel {} does not know a master named '{}'",
                              errors.empty() ? "" : "; ", sentinel.endpoint(),
                              printable(options_.sentinel_master));
        continue;
      }
      const auto& fields = expect_array(reply, "the SENTINEL GET-MASTER-ADDR-BY-NAME reply", 2);
      const std::string& host = expect_string(fields[0], "the master's host");
      const std::string& port_text = expect_string(fields[1], "the master's port");
      const auto port = parse_decimal(port_text, 65535);
      if (host.empty() || !port || *port == 0 || !all_digits(port_text)) {
        throw ProtocolError(fmt::format("fairsem: sentinel {} named the master {}:{}",
                                        sentinel.endpoint(), printable(host),
                                        printable(port_text)));
      }
      // The sentinel that answered is asked first next time.
      std::rotate(sentinels_.begin(), sentinels_.begin() + static_cast<std::ptrdiff_t>(i),
                  sentinels_.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      return NodeAddress{host, static_cast<int>(*port)};
    } catch (const Error& e) {
      refused = refused || dynamic_cast<const AuthError*>(&e) != nullptr;
      errors += fmt::format("{}{}", errors.empty() ? "" : "; ", e.what());
    }
  }
  discovery_helpers::fail(refused,
                          fmt::format("fairsem: no sentinel named the master: {}", errors));
}

}  // namespace fairsem::detail
