#pragma once

// Shared by the `fairsem` subcommands: exit codes, durations,
// and turning an exception into one line on stderr plus an exit code.

#include <signal.h>
#include <fairsem/fairsem.hpp>

#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include "exit_codes.hpp"

namespace fairsem::cli {

using args::kExitInternal;
using args::kExitTempFail;
using args::kExitUnavailable;
using args::kExitUsage;
inline constexpr int kExitCannotExecute = 126;
inline constexpr int kExitNotFound = 127;

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
