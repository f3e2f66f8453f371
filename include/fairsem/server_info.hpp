#pragma once

#include <chrono>
#include <string>

#include "fairsem/connection_options.hpp"

namespace fairsem {

/// What `probe_server` learned about a Redis server.
struct ServerInfo {
  std::string endpoint;       // "host:port" or "unix:/path"
  std::string redis_version;  // INFO server: redis_version
  std::string redis_mode;     // INFO server: redis_mode (standalone, cluster, sentinel)
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
