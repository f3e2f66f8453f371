#include "fairsem/impl/router.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "fairsem/impl/connection.hpp"
#include "fairsem/impl/text.hpp"

namespace fairsem::detail {

namespace {

std::uint16_t crc16_xmodem(std::string_view bytes) noexcept {
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
std::optional<NodeAddress> parse_host_port(std::string_view text, const NodeAddress& from) {
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

/// Opens a short-lived connection for a question to a seed node or a sentinel: one attempt,
/// so that a dead node costs one connect timeout before the next is tried.
Connection question_connection(ConnectionOptions options) {
  options.reconnect_attempts = 1;
  return Connection(std::move(options));
}

}  // namespace

int key_slot(std::string_view key) noexcept {
  const std::size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const std::size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return crc16_xmodem(key) % kClusterSlots;
}

std::optional<Redirect> parse_redirect(std::string_view error, const NodeAddress& from) {
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
  auto node = parse_host_port(where, from);
  if (!node) return std::nullopt;
  r.slot = static_cast<int>(*slot);
  r.node = std::move(*node);
  return r;
}

Router::Router(ConnectionOptions options) : options_(std::move(options)) {
  if (options_.cluster) {
    nodes_.push_back(NodeAddress{options_.host, options_.port});
    for (const NodeAddress& seed : options_.seeds) node_index(nodes_, seed);
    seed_count_ = nodes_.size();
    owner_.assign(kClusterSlots, -1);
  }
  sentinels_ = options_.sentinels;
}

ConnectionOptions Router::node_options(const NodeAddress& node) const {
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

std::int32_t Router::node_index(std::vector<NodeAddress>& nodes, const NodeAddress& node) {
  const auto it = std::find(nodes.begin(), nodes.end(), node);
  if (it != nodes.end()) return static_cast<std::int32_t>(it - nodes.begin());
  nodes.push_back(node);
  return static_cast<std::int32_t>(nodes.size() - 1);
}

NodeAddress Router::target(int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  if (sentinel()) {
    if (!master_) master_ = ask_sentinels();
    return *master_;
  }
  if (slot < 0) {
    // No slot yet: any node answers (and redirects a keyed command to the right one).
    for (const std::int32_t owner : owner_) {
      if (owner >= 0) return nodes_[static_cast<std::size_t>(owner)];
    }
    return nodes_.front();
  }
  if (owner_[static_cast<std::size_t>(slot)] < 0) refresh_slots();
  const std::int32_t owner = owner_[static_cast<std::size_t>(slot)];
  if (owner < 0) {
    throw ConnectionError(fmt::format(
        "fairsem: no master serves hash slot {} in the cluster of {} (the cluster is not fully "
        "set up, or lost that shard)",
        slot, options_.endpoint()));
  }
  return nodes_[static_cast<std::size_t>(owner)];
}

void Router::moved(int slot, const NodeAddress& node) {
  if (slot < 0 || slot >= kClusterSlots) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (owner_.empty()) return;
  owner_[static_cast<std::size_t>(slot)] = node_index(nodes_, node);
}

void Router::forget() {
  std::lock_guard<std::mutex> lock(mu_);
  master_.reset();
  std::fill(owner_.begin(), owner_.end(), -1);
}

void Router::refresh_slots() {
  std::string errors;
  // Every node heard of may answer: the seeds first, then those the last map named.
  const std::vector<NodeAddress> candidates = nodes_;
  for (const NodeAddress& node : candidates) {
    try {
      Connection conn = question_connection(node_options(node));
      const Reply reply = conn.command({"CLUSTER", "SLOTS"});
      // The new map's nodes: the seeds, then the masters it names (nodes heard of before and
      // gone from the map are dropped, so dead ones are not asked again and again).
      std::vector<NodeAddress> nodes(nodes_.begin(),
                                     nodes_.begin() + static_cast<std::ptrdiff_t>(seed_count_));
      std::vector<std::int32_t> owner(kClusterSlots, -1);
      for (const Reply& range : expect_array(reply, "the CLUSTER SLOTS reply")) {
        const auto& fields = expect_array(range, "a CLUSTER SLOTS range", 3);
        const long long first = expect_integer(fields[0], "a CLUSTER SLOTS range start");
        const long long last = expect_integer(fields[1], "a CLUSTER SLOTS range end");
        const auto& master = expect_array(fields[2], "a CLUSTER SLOTS master", 2);
        const std::string& host = expect_string(master[0], "a CLUSTER SLOTS master host");
        const long long port = expect_integer(master[1], "a CLUSTER SLOTS master port");
        if (first < 0 || last >= kClusterSlots || first > last || port < 1 || port > 65535) {
          throw ProtocolError(
              fmt::format("fairsem: CLUSTER SLOTS from {} names slots {}-{} at port {}",
                          node.endpoint(), first, last, port));
        }
        const NodeAddress where{host.empty() || host == "?" ? node.host : host,
                                static_cast<int>(port)};
        const std::int32_t index = node_index(nodes, where);
        std::fill(owner.begin() + first, owner.begin() + last + 1, index);
      }
      nodes_ = std::move(nodes);
      owner_ = std::move(owner);
      return;
    } catch (const Error& e) {
      errors += fmt::format("{}{}", errors.empty() ? "" : "; ", e.what());
    }
  }
  throw ConnectionError(fmt::format("fairsem: no node of the cluster of {} told its slot map: {}",
                                    options_.endpoint(), errors));
}

NodeAddress Router::ask_sentinels() {
  std::string errors;
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    const NodeAddress sentinel = sentinels_[i];
    try {
      ConnectionOptions o = node_options(sentinel);
      o.user = options_.sentinel_user;
      o.password = options_.sentinel_password;
      o.db = 0;
      Connection conn = question_connection(std::move(o));
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
      errors += fmt::format("{}{}", errors.empty() ? "" : "; ", e.what());
    }
  }
  throw ConnectionError(fmt::format("fairsem: no sentinel named the master: {}", errors));
}

}  // namespace fairsem::detail
