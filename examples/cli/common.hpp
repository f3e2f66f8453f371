#pragma once

// Shared by the `fairsem` subcommands: exit codes, the Redis URL default chain, durations,
// and turning an exception into one line on stderr plus an exit code.

#include <signal.h>
#include <fairsem/fairsem.hpp>

#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

namespace fairsem::cli {

// sysexits(3) codes, as documented in `fairsem --help` and the README.
inline constexpr int kExitUsage = 64;        // bad arguments (nothing was sent to Redis)
inline constexpr int kExitUnavailable = 69;  // Redis unreachable, or authentication refused
inline constexpr int kExitInternal = 70;     // anything unexpected
inline constexpr int kExitTempFail = 75;     // not acquired within --wait, or the permit lost
inline constexpr int kExitCannotExecute = 126;
inline constexpr int kExitNotFound = 127;

/// --url, else $FAIRSEM_URL, else $REDIS_URL, else redis://127.0.0.1:6379.
std::string resolve_url(const std::string& flag);

/// "250ms", "10s", "2m", "1h", or bare (possibly fractional) seconds such as "5" or "0.5".
/// Throws InvalidArgument naming `what` for anything else (negative, empty, unknown unit).
std::chrono::milliseconds parse_duration(std::string_view text, std::string_view what);

/// "1.250s", "250ms", "2m03s": short and readable.
std::string format_duration(std::chrono::milliseconds d);

/// A library message without its leading "fairsem: " (the command's own prefix replaces it).
std::string_view without_prefix(std::string_view message);

/// A usage error: message on stderr, then a pointer to --help.
int usage_error(std::string_view command, std::string_view message);

/// Prints one line for the exception currently being handled and returns its exit code:
/// InvalidArgument/LimitMismatchError 64, ConnectionError (timeouts, auth) and NOPERM 69,
/// anything else 70. Call from a catch block.
int report_exception(std::string_view command);

/// Whether stdout is a terminal (for the demo's live view).
bool stdout_is_tty();

/// INT, TERM and HUP, except those this process was started with ignored (nohup, a shell's
/// background job): they stay ignored. For `run` and `status --watch`, which wait for them.
sigset_t stop_signals();

}  // namespace fairsem::cli
