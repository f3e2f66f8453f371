#pragma once

// What Connection (connection_connect-inl.hpp, connection-inl.hpp) does with a raw hiredis
// context: timeouts as timevals, and a failed context turned into a fairsem exception (SIGPIPE
// during a write: sigpipe_guard.hpp). Internal: it includes hiredis.h, which no
// public header does (only the implementation, and so header-only mode, includes it).

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <chrono>
#include <string>
#include <string_view>

namespace fairsem::detail {

/// `ms` as the timeval hiredis takes.
inline timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(ms.count() / 1000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>((ms.count() % 1000) * 1000);
  return tv;
}

/// Where a hiredis error happened, for the message.
struct ErrorSite {
  bool connecting;                    // true: while connecting; false: waiting for a reply
  std::string_view command;           // command name (never its arguments)
  const std::string& endpoint;        // "host:port"
  std::chrono::milliseconds timeout;  // the limit that applied
};

/// The one place that turns a failed hiredis context into a fairsem exception.
[[noreturn]] void throw_error(const redisContext& ctx, int saved_errno, const ErrorSite& site);

}  // namespace fairsem::detail
