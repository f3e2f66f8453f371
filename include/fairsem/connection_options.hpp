#pragma once

// Header-only mode: the first fairsem header a translation unit includes brings the whole
// implementation at its end (fairsem/impl/header_only.hpp), once the headers it includes are
// complete. See fairsem/impl/config.hpp.
#if defined(FAIRSEM_HEADER_ONLY) && !defined(FAIRSEM_IMPL_PENDING)
#define FAIRSEM_IMPL_PENDING
#define FAIRSEM_IMPL_BY_CONNECTION_OPTIONS_HPP
#endif

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "fairsem/errors.hpp"

namespace fairsem {

/// One TCP node of a deployment: a Redis Cluster seed node or a Sentinel.
struct NodeAddress {
  /// Host name or address (IPv4, or IPv6 without brackets).
  std::string host;
  /// TCP port, 1-65535.
  int port = 6379;

  /// "host:port" or "[v6addr]:port".
  std::string endpoint() const;
  friend bool operator==(const NodeAddress& a, const NodeAddress& b) {
    return a.port == b.port && a.host == b.host;
  }
  friend bool operator!=(const NodeAddress& a, const NodeAddress& b) { return !(a == b); }
};

/// TLS for every connection of a deployment (`rediss://`): the server, and for Sentinel the
/// sentinels and the masters they name, for Cluster every node. Each field but `enabled` and
/// `insecure` follows a `redis-cli` flag of the same name. Needs a fairsem built with TLS
/// (`tls_supported()`); otherwise `validate()` refuses `enabled`.
///
/// Verified by default: the server's chain against the CA certificates, and its name, the
/// host connected to (a name, or an IP address) or `sni` when set, against the certificate's
/// subjectAltName. A handshake that fails is a ConnectionError naming the endpoint and
/// OpenSSL's reason; the connect timeout covers it.
struct TlsOptions {
  /// Connect with TLS. Any other field set while this is false is refused, never ignored.
  bool enabled = false;
  /// PEM file of the CA certificates to trust. With `cacertdir` also empty: the system's
  /// trust store (what a managed Redis service's certificate is signed by).
  std::string cacert;
  /// Directory of CA certificates named by their hash (`openssl rehash`).
  std::string cacertdir;
  /// Client certificate (PEM) for servers that require one (`tls-auth-clients yes`); needs
  /// `key`.
  std::string cert;
  /// The client certificate's private key (PEM, unencrypted); needs `cert`.
  std::string key;
  /// Server name to send (SNI) and to verify instead of the host connected to.
  std::string sni;
  /// Turns off verification of both the chain and the name: for tests only. A semaphore
  /// with it says so once, as a warning, through its logger.
  bool insecure = false;
};

/// Where and how to reach Redis. An aggregate: set fields directly, or parse a URL with
/// `from_url`. Every connection fairsem opens checks these with `validate()` first.
///
/// Three deployments (docs/deployments.md):
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
  /// TLS on every connection (`rediss://`, `rediss-cluster://`, `rediss-sentinel://`).
  TlsOptions tls;
  /// Empty (the default): fairsem's connections have no name. Otherwise every connection names
  /// itself when it connects (CLIENT SETNAME), so that CLIENT LIST shows whose it is and what it
  /// does: a Client's pool "<client_name>:pool", its renewal connections "<client_name>:renew",
  /// its wake-up connections "<client_name>:wake"; any other (slot maps, sentinels' masters,
  /// listings) "<client_name>". Characters '!' to '~' only, as Redis allows. An ACL user
  /// needs `+client|setname` for it: without, connecting throws AuthError.
  std::string client_name;

  /// Parses
  /// - `redis://[user[:password]@]host[:port][/db]`, `redis://[::1]:6379`;
  /// - `unix://[user[:password]@]/path/to.sock[?db=N]`;
  /// - Redis Cluster: `redis://[user[:password]@]h1:p1,h2:p2,...` (several seed nodes) or
  ///   `redis-cluster://[user[:password]@]host:port[,...]`;
  /// - Sentinel: `redis-sentinel://[user[:password]@]s1:p1[,s2:p2...]/master_name[/db]`
  ///   (sentinel port 26379 by default; the credentials are the master's);
  /// - TLS: `rediss://`, `rediss-cluster://` and `rediss-sentinel://` as above, with the query
  ///   parameters `cacert`, `cacertdir`, `cert`, `key`, `sni` and `insecure` (true or false),
  ///   e.g. `rediss://:pw@redis.example.com:6380/0?cacert=/etc/ssl/redis-ca.pem`.
  /// User, password, socket path and query values may be percent-encoded; an '@' in a query
  /// value must be (%40), since the last '@' of the URL ends the user info. Throws InvalidArgument
  /// naming the part that is wrong; the message never contains the password.
  static ConnectionOptions from_url(std::string_view url);

  /// Throws InvalidArgument when a field is out of range (port, db, timeouts, backoff), the
  /// deployment fields do not fit together, or TLS is asked for but not built in.
  void validate() const;

  /// "host:port", "[v6addr]:port" or "unix:/path"; "cluster h1:p1,h2:p2" or
  /// "sentinel master 'name' via s1:p1,s2:p2": for messages and logs; no credentials.
  std::string endpoint() const;

  /// True for Redis Cluster or Sentinel options.
  bool routed() const noexcept { return cluster || !sentinel_master.empty(); }

  /// The options as a URL with the password replaced by "***" (safe to log).
  std::string redacted_url() const;
};

/// `url` as it can be quoted in a message or a log: the user info is replaced by "***", and so
/// is a "port" that is not a number (`redis://user:secret` with the host forgotten) together
/// with everything after it, since a password may contain ':', '/', '?', '#', '[' or ']'.
std::string redact_url(std::string_view url);

/// True when this fairsem was built with TLS (CMake option FAIRSEM_TLS: hiredis >= 1.0 with
/// hiredis_ssl, and OpenSSL). Without it, `rediss://` and `TlsOptions::enabled` are refused.
bool tls_supported() noexcept;

}  // namespace fairsem

#if defined(FAIRSEM_HEADER_ONLY) && defined(FAIRSEM_IMPL_BY_CONNECTION_OPTIONS_HPP)
#include "fairsem/impl/header_only.hpp"
#endif
