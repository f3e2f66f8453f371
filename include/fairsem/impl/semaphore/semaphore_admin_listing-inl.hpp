#pragma once

// SemaphoreAdmin::list(): every semaphore under a key prefix, found by SCAN on every master and
// read by the status script over the same connection, which CLIENT NO-TOUCH keeps from counting
// as a use.

#include "fairsem/impl/config.hpp"
#include "fairsem/semaphore.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/protocol/reply.hpp"
#include "fairsem/impl/runtime/runtime.hpp"
#include "fairsem/impl/semaphore/semaphore_core.hpp"
#include "fairsem/impl/text.hpp"

namespace fairsem {

namespace listing_helpers {

using Clock = std::chrono::steady_clock;

/// Keys asked for per SCAN call.
constexpr const char* kScanCount = "1000";

/// `text` as a Redis glob that matches itself only.
FAIRSEM_INLINE std::string glob_literal(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

/// The semaphore names whose meta key (`head` NAME `tail`) SCAN finds on `conn`'s node.
FAIRSEM_INLINE std::vector<std::string> scan_names(detail::Connection& conn,
                                                   const std::string& head, const std::string& tail,
                                                   const std::string& match) {
  const std::string pattern = glob_literal(head) + match + glob_literal(tail);
  std::vector<std::string> names;
  std::string cursor = "0";
  do {
    const detail::Reply reply =
        conn.command({"SCAN", cursor, "MATCH", pattern, "COUNT", kScanCount});
    const auto& items = detail::expect_array(reply, "the SCAN reply", 2);
    cursor = detail::expect_string(items[0], "SCAN's cursor");
    for (const detail::Reply& key_reply : detail::expect_array(items[1], "SCAN's keys", 0)) {
      const std::string& key = detail::expect_string(key_reply, "a key SCAN found");
      if (key.size() <= head.size() + tail.size() || !detail::starts_with(key, head) ||
          key.compare(key.size() - tail.size(), tail.size(), tail) != 0) {
        continue;
      }
      std::string name = key.substr(head.size(), key.size() - head.size() - tail.size());
      try {
        validate_name(name, "semaphore name");
      } catch (const InvalidArgument&) {
        continue;  // not a key of a fairsem semaphore
      }
      names.push_back(std::move(name));
    }
  } while (cursor != "0");
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

/// Asks `conn`'s server not to count this client's reads as uses; false where it cannot.
FAIRSEM_INLINE bool stop_touching(detail::Connection& conn) {
  try {
    conn.command({"CLIENT", "NO-TOUCH", "ON"});
    return true;
  } catch (const ReplyError&) {
    return false;  // before Redis 7.2
  }
}

/// The seconds since `key` was last used, or nullopt where the server does not keep it (an
/// LFU maxmemory-policy) or the key is gone.
FAIRSEM_INLINE std::optional<std::chrono::seconds> idle_time(detail::Connection& conn,
                                                             const std::string& key) {
  try {
    const detail::Reply reply = conn.command({"OBJECT", "IDLETIME", key});
    if (reply.type != detail::Reply::Type::integer || reply.integer < 0) return std::nullopt;
    return std::chrono::seconds(reply.integer);
  } catch (const ReplyError&) {
    return std::nullopt;
  }
}

/// A Cluster's answer that the key lives on another node.
FAIRSEM_INLINE bool redirected(std::string_view server_message) {
  return detail::starts_with(server_message, "MOVED ") ||
         detail::starts_with(server_message, "ASK ");
}

}  // namespace listing_helpers

namespace listing_helpers {

/// Where a listing stands on one master: its connection, and whether that connection's reads
/// leave access times alone (asked for again after a reconnect, which forgets it).
class NodeReader {
 public:
  explicit NodeReader(detail::Connection& conn) : conn_(conn), untouched_(stop_touching(conn)) {
    conn_.count_reconnects(reconnects_);
  }

  /// Semaphore `name`'s listing (nullopt: gone since the SCAN), read over this connection;
  /// where a Cluster moved its slot meanwhile, where it is now.
  std::optional<SemaphoreListing> read(const Client& client,
                                       const std::shared_ptr<detail::Runtime>& runtime,
                                       const std::string& key_prefix, const std::string& name,
                                       const std::string& meta_key) {
    if (reconnects_->load() != seen_reconnects_) {
      seen_reconnects_ = reconnects_->load();
      untouched_ = stop_touching(conn_);
    }
    const auto core = std::make_shared<detail::SemaphoreCore>(
        runtime, name, detail::admin_options(key_prefix), /*admin=*/true);
    SemaphoreListing entry;
    entry.name = name;
    entry.node = conn_.endpoint();
    if (untouched_) entry.idle = idle_time(conn_, meta_key);
    try {
      entry.status = core->status_on(conn_);
    } catch (const ReplyError& e) {
      if (!redirected(e.server_message())) throw;
      entry.status = SemaphoreAdmin(client, name, key_prefix).status();
      entry.idle.reset();
    }
    const bool in_use = !entry.status.holders.empty() || !entry.status.waiters.empty();
    if (entry.status.limit == 0 && !in_use) return std::nullopt;
    if (in_use) entry.idle = std::chrono::seconds(0);
    return entry;
  }

 private:
  detail::Connection& conn_;
  const std::shared_ptr<std::atomic<std::uint64_t>> reconnects_ =
      std::make_shared<std::atomic<std::uint64_t>>(0);
  std::uint64_t seen_reconnects_ = 0;
  bool untouched_;
};

}  // namespace listing_helpers

FAIRSEM_INLINE std::vector<SemaphoreListing> SemaphoreAdmin::list(
    const Client& client, const std::string& key_prefix, const std::string& match,
    std::optional<std::chrono::milliseconds> time_limit) {
  namespace lh = listing_helpers;
  detail::admin_options(key_prefix).validate();
  validate_name(match, "match pattern");
  if (time_limit && time_limit->count() <= 0) {
    throw InvalidArgument(fmt::format("fairsem: a listing's time limit must be positive, got {} ms",
                                      time_limit->count()));
  }
  const std::optional<lh::Clock::time_point> deadline =
      time_limit ? std::optional<lh::Clock::time_point>(lh::Clock::now() + *time_limit)
                 : std::nullopt;
  const auto check_time = [&] {
    if (deadline && lh::Clock::now() >= *deadline) {
      throw TimeoutError(
          fmt::format("fairsem: listing the semaphores under '{}' took more than "
                      "its time limit of {} ms",
                      key_prefix, time_limit->count()));
    }
  };
  // Every key is PREFIX:{NAME}:SUFFIX; the listing looks for the meta key.
  const std::string meta_key = detail::semaphore_keys(key_prefix, "")[3];
  const std::string head = meta_key.substr(0, meta_key.find('{') + 1);
  const std::string tail = meta_key.substr(meta_key.find('}'));
  std::vector<SemaphoreListing> out;
  try {
    for (detail::Connection& conn : client.runtime()->master_connections()) {
      check_time();
      conn.set_deadline(deadline);
      const std::vector<std::string> names = lh::scan_names(conn, head, tail, match);
      if (names.empty()) continue;
      lh::NodeReader reader(conn);
      for (const std::string& name : names) {
        check_time();
        std::string key = head;
        key.append(name).append(tail);
        if (auto entry = reader.read(client, client.runtime(), key_prefix, name, key)) {
          out.push_back(*std::move(entry));
        }
      }
    }
  } catch (const ConnectionError&) {
    check_time();  // a call cut short by the time limit says so
    throw;
  }
  std::sort(out.begin(), out.end(), [](const SemaphoreListing& a, const SemaphoreListing& b) {
    return a.name != b.name ? a.name < b.name : a.node < b.node;
  });
  return out;
}

}  // namespace fairsem
