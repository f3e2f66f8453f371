#pragma once

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/net/router.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "fairsem/errors.hpp"
#include "fairsem/impl/text.hpp"

namespace fairsem::detail {

namespace router_helpers {

FAIRSEM_INLINE std::uint16_t crc16_xmodem(std::string_view bytes) noexcept {
  std::uint16_t crc = 0;
  for (const char ch : bytes) {
    crc = static_cast<std::uint16_t>(
        crc ^ (static_cast<std::uint16_t>(static_cast<unsigned char>(ch)) << 8U));
    for (int bit = 0; bit < 8; ++bit) {
      const bool top = (crc & 0x8000U) != 0;
      crc = static_cast<std::uint16_t>(crc << 1U);
      if (top) crc = static_cast<std::uint16_t>(crc ^ 0x1021U);
    }
  }
  return crc;
}

/// "host:port" or "[v6]:port" as a redirection names it; nullopt when malformed.
FAIRSEM_INLINE std::optional<NodeAddress> parse_host_port(std::string_view text,
                                                          const NodeAddress& from) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view host = text.substr(0, colon);
  const auto port = parse_decimal(text.substr(colon + 1), 65535);
  if (!port || *port == 0 || !all_digits(text.substr(colon + 1))) return std::nullopt;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  // An empty host (or "?") means "the node you are talking to".
  if (host.empty() || host == "?") return NodeAddress{from.host, static_cast<int>(*port)};
  return NodeAddress{std::string(host), static_cast<int>(*port)};
}

/// `nodes` in their order, each once.
FAIRSEM_INLINE std::vector<NodeAddress> without_duplicates(const std::vector<NodeAddress>& nodes) {
  std::vector<NodeAddress> distinct;
  for (const NodeAddress& node : nodes) {
    if (std::find(distinct.begin(), distinct.end(), node) == distinct.end()) {
      distinct.push_back(node);
    }
  }
  return distinct;
}

}  // namespace router_helpers

FAIRSEM_INLINE int key_slot(std::string_view key) noexcept {
  const std::size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const std::size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return router_helpers::crc16_xmodem(key) % kClusterSlots;
}

FAIRSEM_INLINE std::optional<Redirect> parse_redirect(std::string_view error,
                                                      const NodeAddress& from) {
  Redirect r;
  if (starts_with(error, "MOVED ")) {
    r.kind = Redirect::Kind::moved;
    error.remove_prefix(6);
  } else if (starts_with(error, "ASK ")) {
    r.kind = Redirect::Kind::ask;
    error.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const std::size_t space = error.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::string_view slot_text = error.substr(0, space);
  const auto slot = parse_decimal(slot_text, kClusterSlots - 1);
  if (!slot || !all_digits(slot_text)) return std::nullopt;
  std::string_view where = error.substr(space + 1);
  where = where.substr(0, where.find_first_of(" \r\n"));
  auto node = router_helpers::parse_host_port(where, from);
  if (!node) return std::nullopt;
  r.slot = static_cast<int>(*slot);
  r.node = std::move(*node);
  return r;
}

FAIRSEM_INLINE Router::Router(const std::vector<NodeAddress>& seeds)
    : nodes_(router_helpers::without_duplicates(seeds)),
      seed_count_(nodes_.size()),
      owner_(kClusterSlots, -1) {}

FAIRSEM_INLINE std::int32_t Router::node_index(std::vector<NodeAddress>& nodes,
                                               const NodeAddress& node) {
  const auto it = std::find(nodes.begin(), nodes.end(), node);
  if (it != nodes.end()) return static_cast<std::int32_t>(it - nodes.begin());
  nodes.push_back(node);
  return static_cast<std::int32_t>(nodes.size() - 1);
}

FAIRSEM_INLINE std::optional<NodeAddress> Router::lookup(int slot) const {
  if (slot < 0) {
    // No slot: any node answers (and redirects a keyed command to the right one).
    for (const std::int32_t owner : owner_) {
      if (owner >= 0) return nodes_[static_cast<std::size_t>(owner)];
    }
    if (seed_count_ > 0) return nodes_.front();
    return std::nullopt;
  }
  if (slot >= kClusterSlots) return std::nullopt;
  const std::int32_t owner = owner_[static_cast<std::size_t>(slot)];
  if (owner < 0) return std::nullopt;
  return nodes_[static_cast<std::size_t>(owner)];
}

FAIRSEM_INLINE void Router::moved(int slot, const NodeAddress& node) {
  if (slot < 0 || slot >= kClusterSlots) return;
  owner_[static_cast<std::size_t>(slot)] = node_index(nodes_, node);
}

FAIRSEM_INLINE std::vector<NodeAddress> Router::masters() const {
  std::vector<NodeAddress> out;
  std::vector<bool> seen(nodes_.size(), false);
  for (const std::int32_t index : owner_) {
    if (index < 0 || seen[static_cast<std::size_t>(index)]) continue;
    seen[static_cast<std::size_t>(index)] = true;
    out.push_back(nodes_[static_cast<std::size_t>(index)]);
  }
  return out;
}

FAIRSEM_INLINE void Router::replace(const std::vector<SlotRange>& ranges) {
  // Built aside and swapped in, so that a bad range leaves the map as it was.
  std::vector<NodeAddress> nodes(nodes_.begin(),
                                 nodes_.begin() + static_cast<std::ptrdiff_t>(seed_count_));
  std::vector<std::int32_t> owner(kClusterSlots, -1);
  for (const SlotRange& range : ranges) {
    if (range.first < 0 || range.last >= kClusterSlots || range.first > range.last) {
      throw InvalidArgument(fmt::format("fairsem: no hash slots {}-{} (a slot is 0 to {})",
                                        range.first, range.last, kClusterSlots - 1));
    }
    const std::int32_t index = node_index(nodes, range.node);
    std::fill(owner.begin() + range.first, owner.begin() + range.last + 1, index);
  }
  nodes_ = std::move(nodes);
  owner_ = std::move(owner);
}

FAIRSEM_INLINE void Router::forget() { std::fill(owner_.begin(), owner_.end(), -1); }

}  // namespace fairsem::detail
