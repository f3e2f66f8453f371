#pragma once

// Header-only mode: the first fairsem header a translation unit includes brings the whole
// implementation at its end (fairsem/impl/header_only.hpp), once the headers it includes are
// complete. See fairsem/impl/config.hpp.
#if defined(FAIRSEM_HEADER_ONLY) && !defined(FAIRSEM_IMPL_PENDING)
#define FAIRSEM_IMPL_PENDING
#define FAIRSEM_IMPL_BY_SERVER_INFO_HPP
#endif

#include <chrono>
#include <string>
#include <string_view>

#include "fairsem/connection_options.hpp"

namespace fairsem {

/// Who a server says it is in its INFO server section.
struct ServerIdentity {
  /// INFO server: server_name ("valkey" on Valkey); "redis" when the field is absent (Redis
  /// has none) but redis_version is there; empty when neither is.
  std::string name;
  /// The server's own version: `<server_name>_version` when the server names itself
  /// (valkey_version on Valkey), otherwise redis_version.
  std::string version;
  /// INFO server: redis_version. Valkey reports the Redis version it is compatible with
  /// here (7.2.4 on Valkey 8), not its own.
  std::string redis_version;
  /// INFO server: redis_mode, or server_mode on Valkey (standalone, cluster, sentinel).
  std::string mode;
};

/// Reads the identity out of the text of an INFO server (or INFO) reply; fields it lacks stay
/// empty. No I/O.
ServerIdentity parse_server_identity(std::string_view info);

/// What `probe_server` learned about a Redis (or Valkey) server.
struct ServerInfo {
  std::string endpoint;        // "host:port" or "unix:/path"
  std::string server_name;     // ServerIdentity::name: "redis" or "valkey"
  std::string server_version;  // ServerIdentity::version: e.g. 7.0.15 on Redis, 8.0.1 on Valkey
  std::string redis_version;   // INFO server: redis_version (7.2.4 on Valkey 8, see above)
  std::string redis_mode;      // INFO server: redis_mode, or server_mode on Valkey
  /// The server clock, read by fairsem's embedded script (the clock every lease uses).
  std::chrono::system_clock::time_point server_time;
  /// Server clock minus this machine's clock, estimated at the midpoint of the call. fairsem
  /// never uses it (leases are computed on the server); it is shown so operators see skew.
  std::chrono::milliseconds clock_offset{0};
  /// Round trips of PING measured over `samples` calls on one connection.
  std::chrono::nanoseconds ping_min{0};
  std::chrono::nanoseconds ping_median{0};
  /// Round trips of EVALSHA of the embedded clock script (the cost floor of a fairsem call).
  std::chrono::nanoseconds script_median{0};
  int samples = 0;
};

/// Connects, reads the version and mode, runs the embedded clock script and times `samples`
/// PING and EVALSHA round trips (samples >= 1). Throws InvalidArgument, ConnectionError,
/// TimeoutError, AuthError or ReplyError.
ServerInfo probe_server(const ConnectionOptions& options, int samples = 200);

}  // namespace fairsem

#if defined(FAIRSEM_HEADER_ONLY) && defined(FAIRSEM_IMPL_BY_SERVER_INFO_HPP)
#include "fairsem/impl/header_only.hpp"
#endif
