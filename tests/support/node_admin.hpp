#pragma once

// What the deployment harnesses (redis_cluster.cpp, redis_sentinel.cpp) ask a node directly:
// one admin command on a connection of its own, its role, the tail of a log.

#include <chrono>
#include <exception>
#include <string>
#include <vector>

#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/protocol/reply.hpp"
#include "redis_server.hpp"

namespace fairsem::test {

/// One admin command to `node`, reached as its options() say (over TLS for a TLS server), on a
/// connection of its own (so that a harness holds no connection state and may be used from any
/// thread). Error replies throw ReplyError. The default reply timeout leaves room for MIGRATE,
/// which is given 5 s to reach its target.
inline detail::Reply admin(const RedisServer& node, const std::vector<std::string>& args,
                           std::chrono::milliseconds reply_timeout = std::chrono::seconds(15)) {
  ConnectionOptions options = node.options();
  options.connect_timeout = std::chrono::milliseconds(1000);
  options.command_timeout = reply_timeout;
  options.reconnect_attempts = 1;
  detail::Connection conn(options);
  return conn.command(detail::Args(args.begin(), args.end()));
}

/// A node's answer to ROLE.
struct Role {
  std::string role;  // "master", "slave" or "sentinel"
  int master_port = 0;
  std::string link_state;  // of a replica: "connected" when its link is up
};

inline Role role_of(const RedisServer& node) {
  const detail::Reply reply = admin(node, {"ROLE"});
  const auto& fields = detail::expect_array(reply, "ROLE", 1);
  Role role;
  role.role = detail::expect_string(fields[0], "role");
  if (role.role == "slave" && fields.size() >= 4) {
    role.master_port = static_cast<int>(detail::expect_integer(fields[2], "master port"));
    role.link_state = detail::expect_string(fields[3], "replication state");
  }
  return role;
}

/// What a node is, for a deployment's logs: "master", "replica of PORT, LINK_STATE",
/// "stopped", or why it did not answer.
inline std::string describe_role(const RedisServer& node) {
  if (!node.running()) return "stopped";
  try {
    const Role r = role_of(node);
    if (r.role == "slave")
      return "replica of " + std::to_string(r.master_port) + ", " + r.link_state;
    return r.role;
  } catch (const std::exception& e) {
    return std::string("not answering: ") + e.what();
  }
}

/// The last `lines` lines of `text`.
inline std::string tail(const std::string& text, int lines) {
  std::size_t at = text.size();
  if (at > 0 && text[at - 1] == '\n') --at;
  for (int seen = 0; at > 0; --at) {
    if (text[at - 1] == '\n' && ++seen == lines) break;
  }
  return text.substr(at);
}

}  // namespace fairsem::test
