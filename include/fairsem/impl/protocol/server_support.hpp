#pragma once

// What fairsem needs of the server, and how a server that lacks it refuses. fairsem sends no
// INFO before its work (a restricted ACL user need not be allowed it): it learns that a server
// is too old from the refusal, and only then asks which server it is, for the message.

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace fairsem::detail {

class Connection;

/// The oldest servers fairsem works with. From its script: ZPOPMIN and writes after TIME
/// (script effects replication by default) are Redis 5.0; from the client: BRPOP with a timeout
/// in fractions of a second, and AUTH with a user name, are Redis 6.0. Every Valkey has them.
inline constexpr std::string_view kMinimumServer = "Redis >= 6.0 or Valkey";

/// When `server_message` is how a server refuses something fairsem relies on that it lacks
/// (being older than kMinimumServer, or having had a command renamed or disabled), what that
/// is; otherwise nullopt.
inline std::optional<std::string_view> missing_server_feature(std::string_view server_message) {
  struct Sign {
    std::string_view refusal;
    std::string_view feature;
  };
  static constexpr std::array<Sign, 4> kSigns{{
      // BRPOP before Redis 6.0 (getTimeoutFromObjectOrReply); 6.0 says "not a float".
      {"timeout is not an integer or out of range",
       "BRPOP with a timeout in fractions of a second (Redis 6.0)"},
      // Redis before 5.0, scripts replicated verbatim by default.
      {"Write commands not allowed after non deterministic commands",
       "writes after TIME in a script (script effects replication by default, Redis 5.0)"},
      // Redis up to 6.2 ("... from Lua script"), Redis 7 ("... from script"), Valkey.
      {"Unknown Redis command called from",
       "a command fairsem's script calls (ZPOPMIN is Redis 5.0; or one was renamed or "
       "disabled with rename-command)"},
      {"Unknown command called from script",
       "a command fairsem's script calls (one was renamed or disabled with rename-command)"},
  }};
  for (const Sign& sign : kSigns) {
    if (server_message.find(sign.refusal) != std::string_view::npos) return sign.feature;
  }
  return std::nullopt;
}

/// "Redis 5.0.14", "Valkey 8.0.1", or why that could not be read, from INFO server on `conn`.
/// Never throws (a failed INFO is described instead). Defined in server_info-inl.hpp.
std::string describe_server(Connection& conn) noexcept;

/// The message for a server that refused `feature` (see missing_server_feature).
inline std::string unsupported_server_message(std::string_view what_failed,
                                              std::string_view feature, std::string_view server,
                                              std::string_view server_message) {
  std::string text(what_failed);
  text += ": this server lacks ";
  text += feature;
  text += "; fairsem needs ";
  text += kMinimumServer;
  text += ", and this server is ";
  text += server;
  text += " (it replied: ";
  text += server_message;
  text += ")";
  return text;
}

}  // namespace fairsem::detail
