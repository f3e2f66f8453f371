#pragma once

// How fairsem's semaphore operations reach a server, for tests that watch for them.

#include <string>

#include "fairsem/impl/net/connection.hpp"

namespace fairsem::test {

/// True when the server runs function libraries (FCALL: Redis 7.0 and later, Valkey).
inline bool has_functions(detail::Connection& admin) {
  const detail::Reply info = admin.command({"COMMAND", "INFO", "FCALL"});
  return !info.elements.empty() && info.elements[0].type == detail::Reply::Type::array;
}

/// The command a semaphore operation arrives as: "FCALL" where the server has functions,
/// "EVALSHA" where it has not.
inline std::string script_command(detail::Connection& admin) {
  return has_functions(admin) ? "FCALL" : "EVALSHA";
}

}  // namespace fairsem::test
