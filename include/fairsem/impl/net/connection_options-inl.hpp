#pragma once

// ConnectionOptions: validation, and how the options are shown (endpoint, redacted URL).
// The URL parser is in url_parser-inl.hpp.

#include <fmt/format.h>
#include "fairsem/impl/config.hpp"

#include "fairsem/connection_options.hpp"
#include "fairsem/impl/net/tls.hpp"
#include "fairsem/impl/text.hpp"

namespace fairsem {

FAIRSEM_INLINE std::string NodeAddress::endpoint() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

namespace connection_options_helpers {

[[noreturn]] FAIRSEM_INLINE void fail_options(const std::string& what) {
  throw InvalidArgument(fmt::format("fairsem: invalid connection options: {}", what));
}

FAIRSEM_INLINE void check_node(const NodeAddress& node, std::string_view what) {
  if (node.host.empty()) fail_options(fmt::format("{} has an empty host", what));
  if (detail::has_space_or_control(node.host)) {
    fail_options(fmt::format("{} host contains whitespace or control characters", what));
  }
  if (node.port < 1 || node.port > 65535) {
    fail_options(fmt::format("{} port {} is out of range 1-65535", what, node.port));
  }
}

/// The Sentinel fields, when sentinel_master is set.
FAIRSEM_INLINE void check_sentinel(const ConnectionOptions& o) {
  if (o.cluster)
    fail_options("cluster and sentinel_master exclude each other; choose one deployment");
  if (!o.unix_path.empty())
    fail_options("Sentinel mode reaches the master over TCP; unix_path is set");
  if (o.sentinels.empty()) fail_options("sentinel_master is set but no sentinels are given");
  if (detail::has_space_or_control(o.sentinel_master)) {
    fail_options("sentinel_master contains whitespace or control characters");
  }
  for (const NodeAddress& s : o.sentinels) check_node(s, "a sentinel");
  if (!o.seeds.empty()) fail_options("seeds are for Redis Cluster (cluster = true), not Sentinel");
}

/// Standalone and cluster: host and port, or the socket path; the cluster's own rules.
FAIRSEM_INLINE void check_server(const ConnectionOptions& o) {
  if (!o.sentinels.empty()) {
    fail_options("sentinels are given but sentinel_master (the name) is empty");
  }
  if (!o.seeds.empty() && !o.cluster) fail_options("seeds are only used with cluster = true");
  if (o.cluster) {
    if (!o.unix_path.empty()) fail_options("Redis Cluster is reached over TCP; unix_path is set");
    if (o.db != 0) fail_options(fmt::format("Redis Cluster has only database 0, db is {}", o.db));
    for (const NodeAddress& s : o.seeds) check_node(s, "a seed node");
  }
  if (o.unix_path.empty()) {
    if (o.host.empty()) fail_options("host is empty (set host or unix_path)");
    if (detail::has_space_or_control(o.host)) {
      fail_options("host contains whitespace or control characters");
    }
    if (o.port < 1 || o.port > 65535) {
      fail_options(fmt::format("port {} is out of range 1-65535", o.port));
    }
  } else if (o.unix_path[0] != '/') {
    fail_options(fmt::format("unix_path '{}' is not an absolute path", o.unix_path));
  } else if (o.unix_path.find('\0') != std::string::npos) {
    fail_options("unix_path contains a NUL byte");
  } else if (o.unix_path.size() > ConnectionOptions::kMaxUnixPath) {
    fail_options(fmt::format("unix_path is {} bytes long; a Unix socket path holds at most {}",
                             o.unix_path.size(), ConnectionOptions::kMaxUnixPath));
  }
}

/// The TLS fields: only with `enabled`, only over TCP, a certificate with its key.
FAIRSEM_INLINE void check_tls(const ConnectionOptions& o) {
  const TlsOptions& t = o.tls;
  if (!t.enabled) {
    const bool any = !t.cacert.empty() || !t.cacertdir.empty() || !t.cert.empty() ||
                     !t.key.empty() || !t.sni.empty() || t.insecure;
    if (any) fail_options("tls fields are set but tls.enabled is false (use rediss://)");
    return;
  }
  if (!tls_supported()) fail_options(std::string(detail::kTlsNotBuiltIn));
  if (!o.unix_path.empty()) fail_options("TLS is for TCP connections; unix_path is set");
  if (t.cert.empty() != t.key.empty()) {
    fail_options(t.cert.empty() ? "tls.key is set without tls.cert (the client certificate)"
                                : "tls.cert is set without tls.key (its private key)");
  }
  for (const std::string* path : {&t.cacert, &t.cacertdir, &t.cert, &t.key}) {
    if (path->find('\0') != std::string::npos) fail_options("a TLS file path contains a NUL byte");
  }
  if (detail::has_space_or_control(t.sni))
    fail_options("tls.sni contains whitespace or control characters");
}

}  // namespace connection_options_helpers

FAIRSEM_INLINE void ConnectionOptions::validate() const {
  const auto fail = connection_options_helpers::fail_options;
  if (!sentinel_master.empty()) {
    connection_options_helpers::check_sentinel(*this);
  } else {
    connection_options_helpers::check_server(*this);
  }
  connection_options_helpers::check_tls(*this);
  if (db < 0) fail(fmt::format("db {} is negative", db));
  if (connect_timeout.count() <= 0) {
    fail(fmt::format("connect_timeout must be positive, got {} ms", connect_timeout.count()));
  }
  if (command_timeout.count() <= 0) {
    fail(fmt::format("command_timeout must be positive, got {} ms", command_timeout.count()));
  }
  if (reconnect_attempts < 1) {
    fail(fmt::format("reconnect_attempts must be at least 1, got {}", reconnect_attempts));
  }
  if (reconnect_backoff_min.count() <= 0) {
    fail(fmt::format("reconnect_backoff_min must be positive, got {} ms",
                     reconnect_backoff_min.count()));
  }
  if (reconnect_backoff_max < reconnect_backoff_min) {
    fail(fmt::format("reconnect_backoff_max ({} ms) is below reconnect_backoff_min ({} ms)",
                     reconnect_backoff_max.count(), reconnect_backoff_min.count()));
  }
  for (std::size_t i = 0; i < client_name.size(); ++i) {
    const auto c = static_cast<unsigned char>(client_name[i]);
    if (c < '!' || c > '~') {
      fail(
          fmt::format("client_name has character code {} at position {}: Redis allows only "
                      "'!' to '~' in a connection's name (no spaces)",
                      static_cast<int>(c), i));
    }
  }
}

namespace connection_options_helpers {

FAIRSEM_INLINE std::string join_endpoints(const NodeAddress* first,
                                          const std::vector<NodeAddress>& rest) {
  std::string out = first != nullptr ? first->endpoint() : std::string();
  for (const NodeAddress& node : rest) {
    if (!out.empty()) out += ',';
    out += node.endpoint();
  }
  return out;
}

}  // namespace connection_options_helpers

FAIRSEM_INLINE std::string ConnectionOptions::endpoint() const {
  if (!sentinel_master.empty()) {
    return fmt::format("sentinel master '{}' via {}", printable(sentinel_master),
                       connection_options_helpers::join_endpoints(nullptr, sentinels));
  }
  if (!unix_path.empty()) return "unix:" + unix_path;
  const NodeAddress first{host, port};
  if (cluster) return "cluster " + connection_options_helpers::join_endpoints(&first, seeds);
  return first.endpoint();
}

namespace connection_options_helpers {

/// `value` with the bytes that would end or confuse a query value percent-encoded.
FAIRSEM_INLINE std::string query_escaped(std::string_view value) {
  std::string out;
  for (const char ch : value) {
    const auto c = static_cast<unsigned char>(ch);
    if (c <= 0x20 || c >= 0x7f || ch == '%' || ch == '&' || ch == '#' || ch == '@' || ch == '?' ||
        ch == '=') {
      out += fmt::format("%{:02X}", c);
    } else {
      out.push_back(ch);
    }
  }
  return out;
}

/// "?cacert=...&insecure=true" for the TLS fields that are set (none: "").
FAIRSEM_INLINE std::string tls_query(const TlsOptions& t) {
  std::string out;
  const auto add = [&out](std::string_view name, std::string_view value) {
    if (value.empty()) return;
    out += out.empty() ? '?' : '&';
    out += name;
    out += '=';
    out += query_escaped(value);
  };
  add("cacert", t.cacert);
  add("cacertdir", t.cacertdir);
  add("cert", t.cert);
  add("key", t.key);
  add("sni", t.sni);
  if (t.insecure) add("insecure", "true");
  return out;
}

}  // namespace connection_options_helpers

FAIRSEM_INLINE std::string ConnectionOptions::redacted_url() const {
  std::string auth;
  if (!user.empty() || !password.empty()) {
    auth = user;
    if (!password.empty()) auth += ":***";
    auth += '@';
  }
  const std::string s = tls.enabled ? "s" : "";
  if (!sentinel_master.empty()) {
    std::string url = "redis" + s + "-sentinel://" + auth +
                      connection_options_helpers::join_endpoints(nullptr, sentinels) + "/" +
                      sentinel_master;
    if (db != 0) url += fmt::format("/{}", db);
    return url + connection_options_helpers::tls_query(tls);
  }
  if (!unix_path.empty()) {
    std::string url = "unix://" + auth + unix_path;
    if (db != 0) url += fmt::format("?db={}", db);
    return url;
  }
  const NodeAddress first{host, port};
  if (cluster) {
    return "redis" + s + "-cluster://" + auth +
           connection_options_helpers::join_endpoints(&first, seeds) +
           connection_options_helpers::tls_query(tls);
  }
  std::string url = "redis" + s + "://" + auth + first.endpoint();
  if (db != 0) url += fmt::format("/{}", db);
  return url + connection_options_helpers::tls_query(tls);
}

}  // namespace fairsem
