#pragma once

// ConnectionOptions::from_url and redact_url: the URL forms documented in
// connection_options.hpp. Every refusal is an InvalidArgument that quotes the URL redacted.

#include <fmt/format.h>
#include "fairsem/impl/config.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <utility>

#include "fairsem/connection_options.hpp"
#include "fairsem/impl/net/tls.hpp"
#include "fairsem/impl/text.hpp"

namespace fairsem {

FAIRSEM_INLINE std::string redact_url(std::string_view url) {
  using detail::all_digits;
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

namespace url_parser_helpers {

using detail::all_digits;
using detail::has_space_or_control;
using detail::parse_decimal;
using detail::percent_decode;
using detail::starts_with_nocase;

/// The query parameters of a TLS URL, one per TlsOptions field (redis-cli's flag names).
inline constexpr std::string_view kTlsParameters = "cacert, cacertdir, cert, key, sni, insecure";

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

  /// Splits "path?query" at the '?'; refuses a fragment anywhere.
  std::pair<std::string_view, std::string_view> split_query(std::string_view tail) const {
    if (tail.find('#') != std::string_view::npos) fail("a fragment ('#') is not allowed");
    const std::size_t q = tail.find('?');
    if (q == std::string_view::npos) return {tail, {}};
    return {tail.substr(0, q), tail.substr(q + 1)};
  }

  /// One "name=value" of a TLS URL's query into out.tls.
  void parse_tls_parameter(std::string_view name, std::string_view raw,
                           ConnectionOptions& out) const {
    auto value = percent_decode(raw);
    if (!value) fail(fmt::format("malformed percent-encoding in query parameter '{}'", name));
    if (value->empty()) fail(fmt::format("query parameter '{}' needs a value", name));
    TlsOptions& tls = out.tls;
    std::string* field = name == "cacert"      ? &tls.cacert
                         : name == "cacertdir" ? &tls.cacertdir
                         : name == "cert"      ? &tls.cert
                         : name == "key"       ? &tls.key
                         : name == "sni"       ? &tls.sni
                                               : nullptr;
    if (field != nullptr) {
      if (!field->empty()) fail(fmt::format("query parameter '{}' is given twice", name));
      *field = std::move(*value);
      return;
    }
    // insecure: the only other name parse_query lets through.
    if (*value == "true" || *value == "1") {
      tls.insecure = true;
    } else if (*value != "false" && *value != "0") {
      fail(fmt::format("query parameter 'insecure' must be true or false, not '{}'",
                       detail::printable(*value)));
    }
  }

  /// The query of a URL: `db` for unix://, the TLS parameters for rediss schemes.
  void parse_query(std::string_view query, ConnectionOptions& out, bool unix_socket) const {
    if (query.empty()) return;
    bool seen_insecure = false;
    while (true) {
      const std::size_t amp = query.find('&');
      const std::string_view param = query.substr(0, amp);
      const std::size_t eq = param.find('=');
      const std::string_view name = param.substr(0, eq);
      const std::string_view value =
          eq == std::string_view::npos ? std::string_view{} : param.substr(eq + 1);
      if (name == "insecure" && out.tls.enabled) {
        if (seen_insecure) fail("query parameter 'insecure' is given twice");
        seen_insecure = true;
      }
      parse_parameter(name, value, out, unix_socket);
      if (amp == std::string_view::npos) break;
      query = query.substr(amp + 1);
    }
  }

  /// One "name=value" of a query.
  void parse_parameter(std::string_view name, std::string_view value, ConnectionOptions& out,
                       bool unix_socket) const {
    const bool tls_name = name == "cacert" || name == "cacertdir" || name == "cert" ||
                          name == "key" || name == "sni" || name == "insecure";
    if (unix_socket && name == "db") {
      if (value.empty()) fail("query parameter 'db' needs a value (db=N)");
      out.db = parse_db(value);
    } else if (tls_name && out.tls.enabled) {
      parse_tls_parameter(name, value, out);
    } else if (tls_name) {
      fail(
          fmt::format("query parameter '{}' is a TLS setting: use rediss:// (or rediss-cluster://, "
                      "rediss-sentinel://)",
                      detail::printable(name)));
    } else if (unix_socket) {
      fail(fmt::format("unknown query parameter '{}' (only db=N is supported)",
                       detail::printable(name)));
    } else if (out.tls.enabled) {
      fail(
          fmt::format("unknown query parameter '{}' (a TLS URL takes {}; the database goes "
                      "in the path)",
                      detail::printable(name), kTlsParameters));
    } else {
      fail(
          "query parameters are not supported in redis:// URLs; put the database in the path "
          "(redis://host:6379/2)");
    }
  }

  /// redis:// (one node: standalone; several: cluster seeds) and redis-cluster://.
  void parse_tcp(std::string_view rest, ConnectionOptions& out, bool cluster) const {
    std::vector<NodeAddress> nodes = parse_authority(rest, 6379, out, true);
    out.host = std::move(nodes[0].host);
    out.port = nodes[0].port;
    out.cluster = cluster || nodes.size() > 1;
    out.seeds.assign(std::make_move_iterator(nodes.begin() + 1),
                     std::make_move_iterator(nodes.end()));
    const auto [path, query] = split_query(rest);
    parse_db_path(path, out);
    parse_query(query, out, false);
    if (out.cluster && out.db != 0) {
      fail(fmt::format("Redis Cluster has only database 0, the URL selects {}", out.db));
    }
  }

  /// redis-sentinel://[user[:password]@]s1:p1[,s2:p2...]/master_name[/db]
  void parse_sentinel(std::string_view rest, ConnectionOptions& out) const {
    out.sentinels = parse_authority(rest, 26379, out);
    const auto [path, query] = split_query(rest);
    if (path.size() <= 1) {
      fail("the master name is missing, e.g. redis-sentinel://127.0.0.1:26379/mymaster");
    }
    const std::string_view after = path.substr(1);
    const std::size_t stop = after.find('/');
    auto name = percent_decode(after.substr(0, stop));
    if (!name) fail("malformed percent-encoding in the master name");
    if (name->empty()) fail("the master name is empty");
    if (has_space_or_control(*name)) {
      fail("the master name contains whitespace or control characters");
    }
    out.sentinel_master = std::move(*name);
    if (stop != std::string_view::npos) parse_db_path(after.substr(stop), out);
    parse_query(query, out, false);
  }

  /// The path after a TCP authority: nothing, or "/" and the database number.
  void parse_db_path(std::string_view path, ConnectionOptions& out) const {
    if (path.empty()) return;
    path.remove_prefix(1);  // the '/'
    if (path.find('/') != std::string_view::npos)
      fail("the path may only hold the database number");
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
    const auto [raw_path, query] = split_query(rest);
    auto path = percent_decode(raw_path);
    if (!path) fail("malformed percent-encoding in the socket path");
    if (path->size() <= 1) fail("the socket path is missing");
    out.unix_path = std::move(*path);
    parse_query(query, out, true);
  }

  ConnectionOptions parse() const {
    ConnectionOptions out;
    if (url.empty()) fail("the URL is empty");
    // Each scheme: its length, whether it is TLS, and the deployment it names.
    enum class Kind { tcp, cluster, sentinel, unix_socket };
    struct Scheme {
      std::string_view prefix;
      bool tls;
      Kind kind;
    };
    static constexpr std::array<Scheme, 7> kSchemes{{
        {"redis://", false, Kind::tcp},
        {"rediss://", true, Kind::tcp},
        {"redis-cluster://", false, Kind::cluster},
        {"rediss-cluster://", true, Kind::cluster},
        {"redis-sentinel://", false, Kind::sentinel},
        {"rediss-sentinel://", true, Kind::sentinel},
        {"unix://", false, Kind::unix_socket},
    }};
    const auto* scheme = std::find_if(kSchemes.begin(), kSchemes.end(), [&](const Scheme& s) {
      return starts_with_nocase(url, s.prefix);
    });
    if (scheme == kSchemes.end()) {
      fail(
          "the scheme must be redis://, rediss:// (TLS), unix://, redis-cluster://, "
          "rediss-cluster://, redis-sentinel:// or rediss-sentinel://");
    }
    out.tls.enabled = scheme->tls;
    if (scheme->tls && !tls_supported()) fail(detail::kTlsNotBuiltIn);
    const std::string_view rest = url.substr(scheme->prefix.size());
    switch (scheme->kind) {
      case Kind::tcp:
        parse_tcp(rest, out, false);
        break;
      case Kind::cluster:
        parse_tcp(rest, out, true);
        break;
      case Kind::sentinel:
        parse_sentinel(rest, out);
        break;
      case Kind::unix_socket:
        parse_unix(rest, out);
        break;
    }
    out.validate();
    return out;
  }
};

}  // namespace url_parser_helpers

FAIRSEM_INLINE ConnectionOptions ConnectionOptions::from_url(std::string_view url) {
  return url_parser_helpers::UrlParser{url}.parse();
}

}  // namespace fairsem
