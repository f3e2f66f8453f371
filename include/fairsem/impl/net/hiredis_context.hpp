#pragma once

// What the Connection units (connect-inl.hpp, connection-inl.hpp) do with a raw hiredis
// context: timeouts as timevals, SIGPIPE kept from killing the process during a write, and a
// failed context turned into a fairsem exception. Internal: it includes hiredis.h, which no
// public header does (only the implementation, and so header-only mode, includes it).

#include <hiredis/hiredis.h>
#include <signal.h>  // NOLINT(modernize-deprecated-headers): POSIX sigset_t
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

/// hiredis writes with write(2); writing to a socket the server has reset raises SIGPIPE, whose
/// default action kills the whole process. For the duration of one flush, SIGPIPE is blocked on
/// this thread and a SIGPIPE raised meanwhile is consumed, so the failed write surfaces as EPIPE
/// (a ConnectionError) and the application's own SIGPIPE handling is left alone.
class SigpipeGuard {
 public:
  SigpipeGuard() noexcept;
  ~SigpipeGuard();
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_mask_{};
  bool was_pending_ = false;
};

}  // namespace fairsem::detail
