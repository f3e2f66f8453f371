#pragma once

#include <fmt/format.h>

#include <chrono>
#include <climits>
#include <string>
#include <string_view>
#include <vector>

#include "fairsem/detail/text.hpp"
#include "fairsem/errors.hpp"

namespace fairsem {

/// One TCP node of a deployment: a Redis Cluster seed node or a Sentinel.
struct NodeAddress {
  /// Host name or address (IPv4, or IPv6 without brackets).
  std::string host;
  /// TCP port, 1-65535.
  int port = 6379;

  /// "host:port" or "[v6addr]:port".
  std::string endpoint() const {
    if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
    return fmt::format("{}:{}", host, port);
  }
  friend bool operator==(const NodeAddress& a, const NodeAddress& b) {
    return a.port == b.port && a.host == b.host;
  }
  friend bool operator!=(const NodeAddress& a, const NodeAddress& b) { return !(a == b); }
};

/// Where and how to reach Redis. An aggregate: set fields directly, or parse a URL with
/// `from_url`. Every connection fairsem opens checks these with `validate()` first.
///
/// Three deployments (README "Deployments"):
/// - standalone (the default): one server at host:port or unix_path;
/// - Redis Cluster (`cluster = true`): host:port and `seeds` are seed nodes; the client learns
///   the slot map from them and talks to the master of each semaphore's slot;
/// - Sentinel (`sentinel_master` set): the client asks `sentinels` where that master is now,
///   and checks with ROLE that it is one; host and port are not used.
struct ConnectionOptions {
  /// Longest Unix socket path the kernel accepts (sockaddr_un::sun_path less its NUL).
  static constexpr std::size_t kMaxUnixPath = 107;

  /// TCP host name or address (IPv4, or IPv6 without brackets). Ignored when `unix_path` is set.
  std::string host = "127.0.0.1";
  /// TCP port, 1-65535. Ignored when `unix_path` is set.
  int port = 6379;
  /// Absolute path of a Unix domain socket; when non-empty it is used instead of host/port.
  std::string unix_path;
  /// ACL user for AUTH. Empty: AUTH with the password only (the `default` user).
  std::string user;
  /// Password for AUTH. With user and password both empty, no AUTH is sent.
  std::string password;
  /// Logical database selected on every (re)connect, >= 0.
  int db = 0;
  /// Limit for establishing the connection (TCP/Unix connect), > 0.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(1)};
  /// Limit for each reply to arrive, > 0. After a timeout the connection is re-established.
  std::chrono::milliseconds command_timeout{std::chrono::seconds(2)};
  /// How many connect attempts a reconnect makes before it gives up, >= 1.
  int reconnect_attempts = 5;
  /// First pause between reconnect attempts; doubles after each failure (with jitter), > 0.
  std::chrono::milliseconds reconnect_backoff_min{50};
  /// Upper bound of the pause between reconnect attempts, >= reconnect_backoff_min.
  std::chrono::milliseconds reconnect_backoff_max{std::chrono::seconds(2)};

  /// Redis Cluster: host:port, then `seeds`, are the nodes asked for the slot map. Needs TCP
  /// and database 0 (a cluster has no other).
  bool cluster = false;
  /// More cluster seed nodes, tried after host:port when that one cannot be reached.
  std::vector<NodeAddress> seeds;
  /// Sentinel: the name of the master the sentinels monitor. Non-empty selects Sentinel mode.
  std::string sentinel_master;
  /// Sentinel: the sentinels to ask, in order (the first that answers is used).
  std::vector<NodeAddress> sentinels;
  /// Sentinel: ACL user and password for the sentinels themselves (user and password are for
  /// the master). Both empty: no AUTH is sent to the sentinels.
  std::string sentinel_user;
  std::string sentinel_password;

  /// Parses
  /// - `redis://[user[:password]@]host[:port][/db]`, `redis://[::1]:6379`;
  /// - `unix://[user[:password]@]/path/to.sock[?db=N]`;
  /// - Redis Cluster: `redis://[user[:password]@]h1:p1,h2:p2,...` (several seed nodes) or
  ///   `redis-cluster://[user[:password]@]host:port[,...]`;
  /// - Sentinel: `redis-sentinel://[user[:password]@]s1:p1[,s2:p2...]/master_name[/db]`
  ///   (sentinel port 26379 by default; the credentials are the master's).
  /// User, password and socket path may be percent-encoded. Throws InvalidArgument naming the
  /// part that is wrong; the message never contains the password.
  static ConnectionOptions from_url(std::string_view url);

  /// Throws InvalidArgument when a field is out of range (port, db, timeouts, backoff) or the
  /// deployment fields do not fit together.
  void validate() const;

  /// "host:port", "[v6addr]:port" or "unix:/path"; "cluster h1:p1,h2:p2" or
  /// "sentinel master 'name' via s1:p1,s2:p2": for messages and logs; no credentials.
  std::string endpoint() const;

  /// True for Redis Cluster or Sentinel options.
  bool routed() const noexcept { return cluster || !sentinel_master.empty(); }

  /// The options as a URL with the password replaced by "***" (safe to log).
  std::string redacted_url() const;
};

namespace detail {

/// A URL that can be quoted in a message: the user info is replaced by "***", and so is a
/// "port" that is not a number (`redis://user:secret` with the host forgotten), together with
/// everything after it, since a password may contain ':', '/', '?', '#', '[' or ']'.
inline std::string redact_url(std::string_view url) {
  std::size_t scheme_end = url.find("://");
  std::size_t start = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  std::size_t at = url.rfind('@');
  if (at != std::string_view::npos && at >= start) {
    std::string out(url.substr(0, start));
    out += "***";
    out += url.substr(at);
    return out;
  }
  std::string_view rest = url.substr(start);
  if (!rest.empty() && rest[0] == '/') return std::string(url);  // a socket path, no user info
  // Each node of the authority ("h1:p1,h2:p2" for a cluster or the sentinels) must have a
  // numeric port, or none; the port of a bracketed IPv6 host follows its ']'.
  const std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  const bool several = authority.find(',') != std::string_view::npos;
  std::size_t node_start = 0;
  for (;;) {
    const std::size_t comma = authority.find(',', node_start);
    const std::string_view node = authority.substr(node_start, comma - node_start);
    std::size_t close = !node.empty() && node[0] == '[' ? node.find(']') : std::string_view::npos;
    std::size_t colon = node.find(':', close == std::string_view::npos ? 0 : close);
    // Of several nodes, one without a port may be the tail of such a password ("user:12,ab").
    const bool portless =
        several && colon == std::string_view::npos && authority.find(':') != std::string_view::npos;
    if (portless || (colon != std::string_view::npos && !all_digits(node.substr(colon + 1)))) {
      // Possibly "user:password" with the host forgotten (and the password may hold ',' or
      // digits): hide everything after the authority's first ':'.
      const std::size_t first_close =
          !rest.empty() && rest[0] == '[' ? rest.find(']') : std::string_view::npos;
      const std::size_t first_colon =
          rest.find(':', first_close == std::string_view::npos ? 0 : first_close);
      std::string out(url.substr(0, start + first_colon + 1));
      out += "***";
      return out;
    }
    if (comma == std::string_view::npos) break;
    node_start = comma + 1;
  }
  return std::string(url);
}

/// Case-insensitive (ASCII) prefix test, for URL schemes.
inline bool starts_with_nocase(std::string_view s, std::string_view prefix) noexcept {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != prefix[i]) return false;
  }
  return true;
}

struct UrlParser {
  std::string_view url;

  [[noreturn]] void fail(std::string_view what) const {
    throw InvalidArgument(
        fmt::format("fairsem: invalid Redis URL '{}': {}", redact_url(url), what));
  }

  void parse_userinfo(std::string_view userinfo, ConnectionOptions& out) const {
    std::size_t colon = userinfo.find(':');
    auto user = percent_decode(userinfo.substr(0, colon));
    if (!user) fail("malformed percent-encoding in the user name");
    out.user = std::move(*user);
    if (colon != std::string_view::npos) {
      auto password = percent_decode(userinfo.substr(colon + 1));
      if (!password) fail("malformed percent-encoding in the password");
      out.password = std::move(*password);
    }
  }

  int parse_db(std::string_view s) const {
    if (s.empty()) return 0;
    if (s[0] == '-' && all_digits(s.substr(1))) {
      fail(fmt::format("database index {} is negative", s));
    }
    if (!all_digits(s)) fail(fmt::format("database '{}' is not a number", s));
    auto value = parse_decimal(s, INT_MAX);
    if (!value) fail(fmt::format("database index {} is too large", s));
    return static_cast<int>(*value);
  }

  int parse_port(std::string_view s) const {
    if (s.empty()) fail("port is empty");
    if (!all_digits(s)) fail("the port is not a number");
    auto value = parse_decimal(s, 65535);
    if (!value || *value == 0) fail(fmt::format("port {} is out of range 1-65535", s));
    return static_cast<int>(*value);
  }

  /// One "host[:port]" or "[v6addr][:port]" of an authority.
  NodeAddress parse_node(std::string_view authority, int default_port,
                         bool* had_port = nullptr) const {
    std::string_view host;
    std::string_view port;
    bool has_port = false;
    if (!authority.empty() && authority[0] == '[') {
      std::size_t close = authority.find(']');
      if (close == std::string_view::npos) fail("IPv6 host is missing its closing ']'");
      host = authority.substr(1, close - 1);
      if (host.find(':') == std::string_view::npos) {
        fail("brackets may only enclose an IPv6 address");
      }
      std::string_view after = authority.substr(close + 1);
      if (!after.empty()) {
        if (after[0] != ':') fail("unexpected characters after the IPv6 host");
        has_port = true;
        port = after.substr(1);
      }
    } else {
      std::size_t colon = authority.find(':');
      if (colon != std::string_view::npos &&
          authority.find(':', colon + 1) != std::string_view::npos) {
        fail("an IPv6 host must be in brackets, e.g. redis://[::1]:6379");
      }
      host = authority.substr(0, colon);
      if (colon != std::string_view::npos) {
        has_port = true;
        port = authority.substr(colon + 1);
      }
    }
    if (host.empty()) fail("host is missing");
    if (host.find_first_of("[]") != std::string_view::npos) {
      fail("the host contains '[' or ']' outside an IPv6 address");
    }
    if (has_space_or_control(host)) fail("host contains whitespace or control characters");
    // An IPv6 zone ("fe80::1%25eth0") is percent-encoded in a URL.
    auto decoded_host = percent_decode(host);
    if (!decoded_host) fail("malformed percent-encoding in the host");
    if (had_port != nullptr) *had_port = has_port;
    return NodeAddress{std::move(*decoded_host), has_port ? parse_port(port) : default_port};
  }

  /// "[user[:password]@]node[,node...]" and what follows it: the nodes, and the rest of the
  /// URL from its first '/', '?' or '#'.
  /// `ports_if_several`: several nodes must each name their port (so that "user:12,ab", a
  /// password with the host forgotten, is refused rather than taken for two nodes).
  std::vector<NodeAddress> parse_authority(std::string_view& rest, int default_port,
                                           ConnectionOptions& out,
                                           bool ports_if_several = false) const {
    // The last '@' ends the user info, so an unencoded '@' or '/' in a password still parses.
    std::size_t at = rest.rfind('@');
    if (at != std::string_view::npos) {
      parse_userinfo(rest.substr(0, at), out);
      rest = rest.substr(at + 1);
    }
    std::size_t end = rest.find_first_of("/?#");
    std::string_view authority = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end);
    std::vector<NodeAddress> nodes;
    bool every_port = true;
    for (;;) {
      std::size_t comma = authority.find(',');
      bool had_port = false;
      nodes.push_back(parse_node(authority.substr(0, comma), default_port, &had_port));
      every_port = every_port && had_port;
      if (comma == std::string_view::npos) break;
      authority = authority.substr(comma + 1);
    }
    if (ports_if_several && nodes.size() > 1 && !every_port) {
      fail("each node of a cluster URL needs its port (redis://h1:7000,h2:7001)");
    }
    return nodes;
  }

  /// redis:// (one node: standalone; several: cluster seeds) and redis-cluster://.
  void parse_tcp(std::string_view rest, ConnectionOptions& out, bool cluster) const {
    std::vector<NodeAddress> nodes = parse_authority(rest, 6379, out, true);
    out.host = std::move(nodes[0].host);
    out.port = nodes[0].port;
    out.cluster = cluster || nodes.size() > 1;
    out.seeds.assign(std::make_move_iterator(nodes.begin() + 1),
                     std::make_move_iterator(nodes.end()));
    parse_tcp_path(rest, out);
    if (out.cluster && out.db != 0) {
      fail(fmt::format("Redis Cluster has only database 0, the URL selects {}", out.db));
    }
  }

  /// redis-sentinel://[user[:password]@]s1:p1[,s2:p2...]/master_name[/db]
  void parse_sentinel(std::string_view rest, ConnectionOptions& out) const {
    out.sentinels = parse_authority(rest, 26379, out);
    if (rest.empty() || rest[0] != '/' || rest.size() == 1) {
      fail("the master name is missing, e.g. redis-sentinel://127.0.0.1:26379/mymaster");
    }
    rest = rest.substr(1);
    std::size_t stop = rest.find_first_of("/?#");
    auto name = percent_decode(rest.substr(0, stop));
    if (!name) fail("malformed percent-encoding in the master name");
    if (name->empty()) fail("the master name is empty");
    if (has_space_or_control(*name)) {
      fail("the master name contains whitespace or control characters");
    }
    out.sentinel_master = std::move(*name);
    if (stop != std::string_view::npos) parse_tcp_path(rest.substr(stop), out);
  }

  /// What follows a redis:// authority: nothing, or "/" and the database number.
  void parse_tcp_path(std::string_view tail, ConnectionOptions& out) const {
    if (tail.empty()) return;
    if (tail[0] == '#') fail("a fragment ('#') is not allowed");
    if (tail[0] == '?') {
      fail(
          "query parameters are not supported in redis:// URLs; put the database in the path "
          "(redis://host:6379/2)");
    }
    std::string_view path = tail.substr(1);
    std::size_t stop = path.find_first_of("?#/");
    if (stop != std::string_view::npos) {
      if (path[stop] == '/') fail("the path may only hold the database number");
      fail("query parameters and fragments are not supported in redis:// URLs");
    }
    out.db = parse_db(path);
  }

  void parse_unix(std::string_view rest, ConnectionOptions& out) const {
    if (rest.empty() || rest[0] != '/') {
      std::size_t at = rest.rfind("@/");
      if (at == std::string_view::npos) {
        fail("the socket path must be absolute, e.g. unix:///run/redis/redis.sock");
      }
      parse_userinfo(rest.substr(0, at), out);
      rest = rest.substr(at + 1);
    }
    std::size_t q = rest.find_first_of("?#");
    auto path = percent_decode(rest.substr(0, q));
    if (!path) fail("malformed percent-encoding in the socket path");
    if (path->size() <= 1) fail("the socket path is missing");
    out.unix_path = std::move(*path);
    if (q == std::string_view::npos) return;
    if (rest[q] == '#') fail("a fragment ('#') is not allowed");
    std::string_view query = rest.substr(q + 1);
    while (!query.empty()) {
      std::size_t amp = query.find('&');
      std::string_view param = query.substr(0, amp);
      std::size_t eq = param.find('=');
      std::string_view key = param.substr(0, eq);
      if (key != "db") {
        fail(fmt::format("unknown query parameter '{}' (only db=N is supported)", key));
      }
      if (eq == std::string_view::npos) fail("query parameter 'db' needs a value (db=N)");
      if (eq + 1 == param.size()) fail("query parameter 'db' needs a value (db=N)");
      out.db = parse_db(param.substr(eq + 1));
      query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    }
  }

  ConnectionOptions parse() const {
    ConnectionOptions out;
    if (url.empty()) fail("the URL is empty");
    if (starts_with_nocase(url, "redis://")) {
      parse_tcp(url.substr(8), out, false);
    } else if (starts_with_nocase(url, "redis-cluster://")) {
      parse_tcp(url.substr(16), out, true);
    } else if (starts_with_nocase(url, "redis-sentinel://")) {
      parse_sentinel(url.substr(17), out);
    } else if (starts_with_nocase(url, "unix://")) {
      parse_unix(url.substr(7), out);
    } else if (starts_with_nocase(url, "rediss://")) {
      fail("TLS (rediss://) is not supported; use redis:// or unix://");
    } else {
      fail("the scheme must be redis://, unix://, redis-cluster:// or redis-sentinel://");
    }
    out.validate();
    return out;
  }
};

}  // namespace detail

inline ConnectionOptions ConnectionOptions::from_url(std::string_view url) {
  return detail::UrlParser{url}.parse();
}

namespace detail {

[[noreturn]] inline void fail_options(const std::string& what) {
  throw InvalidArgument(fmt::format("fairsem: invalid connection options: {}", what));
}

inline void check_node(const NodeAddress& node, std::string_view what) {
  if (node.host.empty()) fail_options(fmt::format("{} has an empty host", what));
  if (has_space_or_control(node.host)) {
    fail_options(fmt::format("{} host contains whitespace or control characters", what));
  }
  if (node.port < 1 || node.port > 65535) {
    fail_options(fmt::format("{} port {} is out of range 1-65535", what, node.port));
  }
}

/// The Sentinel fields, when sentinel_master is set.
inline void check_sentinel(const ConnectionOptions& o) {
  if (o.cluster)
    fail_options("cluster and sentinel_master exclude each other; choose one deployment");
  if (!o.unix_path.empty())
    fail_options("Sentinel mode reaches the master over TCP; unix_path is set");
  if (o.sentinels.empty()) fail_options("sentinel_master is set but no sentinels are given");
  if (has_space_or_control(o.sentinel_master)) {
    fail_options("sentinel_master contains whitespace or control characters");
  }
  for (const NodeAddress& s : o.sentinels) check_node(s, "a sentinel");
  if (!o.seeds.empty()) fail_options("seeds are for Redis Cluster (cluster = true), not Sentinel");
}

/// Standalone and cluster: host and port, or the socket path; the cluster's own rules.
inline void check_server(const ConnectionOptions& o) {
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
    if (has_space_or_control(o.host)) {
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

}  // namespace detail

inline void ConnectionOptions::validate() const {
  const auto fail = detail::fail_options;
  if (!sentinel_master.empty()) {
    detail::check_sentinel(*this);
  } else {
    detail::check_server(*this);
  }
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
}

namespace detail {

inline std::string join_endpoints(const NodeAddress* first, const std::vector<NodeAddress>& rest) {
  std::string out = first != nullptr ? first->endpoint() : std::string();
  for (const NodeAddress& node : rest) {
    if (!out.empty()) out += ',';
    out += node.endpoint();
  }
  return out;
}

}  // namespace detail

inline std::string ConnectionOptions::endpoint() const {
  if (!sentinel_master.empty()) {
    return fmt::format("sentinel master '{}' via {}", detail::printable(sentinel_master),
                       detail::join_endpoints(nullptr, sentinels));
  }
  if (!unix_path.empty()) return "unix:" + unix_path;
  const NodeAddress first{host, port};
  if (cluster) return "cluster " + detail::join_endpoints(&first, seeds);
  return first.endpoint();
}

inline std::string ConnectionOptions::redacted_url() const {
  std::string auth;
  if (!user.empty() || !password.empty()) {
    auth = user;
    if (!password.empty()) auth += ":***";
    auth += '@';
  }
  if (!sentinel_master.empty()) {
    std::string url = "redis-sentinel://" + auth + detail::join_endpoints(nullptr, sentinels) +
                      "/" + sentinel_master;
    if (db != 0) url += fmt::format("/{}", db);
    return url;
  }
  if (!unix_path.empty()) {
    std::string url = "unix://" + auth + unix_path;
    if (db != 0) url += fmt::format("?db={}", db);
    return url;
  }
  const NodeAddress first{host, port};
  if (cluster) return "redis-cluster://" + auth + detail::join_endpoints(&first, seeds);
  std::string url = "redis://" + auth + first.endpoint();
  if (db != 0) url += fmt::format("/{}", db);
  return url;
}

}  // namespace fairsem
