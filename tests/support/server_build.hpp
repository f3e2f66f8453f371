#pragma once

// Which server the tests run against: what the redis-server binary in PATH says it is (Redis
// or Valkey, and its version, from `redis-server --version`), which start-up options it takes,
// and the check that every started server is the one FAIRSEM_TEST_EXPECT_SERVER names.

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "fairsem/server_info.hpp"

namespace fairsem::test {

/// What `<binary> --version` prints: "Redis server v=7.0.15 sha=..." or "Valkey server
/// v=8.0.1 ..." (also when Valkey is run through a link named redis-server).
struct ServerBuild {
  std::string name;     // "redis", "valkey": the first word, in lower case
  std::string version;  // "7.0.15"
  int major = 0;
};

/// Parses the output of `--version`; nullopt when it is not of that form.
std::optional<ServerBuild> parse_server_build(std::string_view version_output);

/// Runs `binary --version` once per binary (cached); throws std::runtime_error quoting the
/// output when it cannot be understood.
const ServerBuild& server_build(const std::string& binary);

/// Whether the server takes `--enable-debug-command local`: Redis from 7.0 (earlier versions
/// have no such directive and refuse to start with it, but allow DEBUG anyway), every Valkey.
bool accepts_enable_debug_command(const ServerBuild& build);

/// Whether the server takes `--cluster-port` (the cluster bus's port): Redis from 7.0, every
/// Valkey. Before, the bus is always on port + 10000.
bool accepts_cluster_port(const ServerBuild& build);

/// The server FAIRSEM_TEST_EXPECT_SERVER names: "NAME [VERSION]", e.g. "valkey 8.0.1",
/// "redis 6.2.16" or "redis 7" (a version matches itself and the versions it is a prefix of
/// at a dot: "7.2" matches 7.2.6, not 7.20.1).
struct ExpectedServer {
  std::string name;
  std::string version;  // empty: any version
  std::string text;     // as written in the environment, for messages
};

/// Parses the variable's value; throws std::runtime_error when it is malformed.
ExpectedServer parse_expected_server(std::string_view text);

/// FAIRSEM_TEST_EXPECT_SERVER, or nullopt when it is unset or empty.
std::optional<ExpectedServer> expected_server();

/// Empty when `actual` (parsed from INFO server) is the expected server, otherwise why not.
std::string server_mismatch(const ExpectedServer& expected, const ServerIdentity& actual);

/// Thrown when a started server is not the one FAIRSEM_TEST_EXPECT_SERVER names: never
/// retried, the whole run is against the wrong server.
class WrongServerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Checks what `binary --version` says against FAIRSEM_TEST_EXPECT_SERVER, if set, before
/// anything is started; throws WrongServerError when it differs.
void check_expected_server(const ServerBuild& build, const std::string& binary);

/// Checks the text of an INFO server reply from `where` ("redis-server at 127.0.0.1:PORT")
/// against FAIRSEM_TEST_EXPECT_SERVER, if set; throws WrongServerError when it differs.
void check_expected_server(std::string_view info_server, const std::string& where);

}  // namespace fairsem::test
