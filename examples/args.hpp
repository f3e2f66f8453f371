#pragma once

// Command lines of the example programs and of the `fairsem` tool: exit codes, the Redis URL's
// default chain, whole numbers in a range, and parsing with CLI11 into values or an exit code.
// Public fairsem API only, like the programs themselves.

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace fairsem::examples {

// sysexits(3) codes, as the programs' comments, `fairsem --help` and docs/cli.md document them.
inline constexpr int kExitUsage = 64;        // bad arguments (nothing was sent to Redis)
inline constexpr int kExitUnavailable = 69;  // Redis unreachable, or authentication refused
inline constexpr int kExitInternal = 70;     // anything unexpected
inline constexpr int kExitTempFail = 75;     // no permit in time, or the permit lost

/// `given` (from --url or a URL argument) unless it is empty, else $FAIRSEM_URL, else
/// $REDIS_URL (each when set and not empty), else redis://127.0.0.1:6379.
std::string resolve_url(const std::string& given);

/// Adds the Redis URL to `app` as `name`: "--url" for an option, "URL" for an optional
/// positional argument. Resolve what it got with resolve_url().
CLI::Option* add_url(CLI::App& app, std::string& url, const std::string& name = "--url");

/// Digits only (no sign, blank, base prefix or exponent), decimal, from `min` to `max`. Give it
/// to CLI::Option::transform, not check: it rewrites "010" as "10", which CLI11 would read as
/// octal.
CLI::Validator whole_number(long long min, long long max);

/// `message` with every URL among the arguments shown without its credentials: CLI11 quotes
/// arguments verbatim, so a URL in the wrong place would show its password.
std::string hide_credentials(std::string message, int argc, char** argv);

/// Parses argv into `app`. Returns nullopt to go on, or the exit code to return at once: 0
/// after --help printed the help on stdout; kExitUsage after a bad argument printed
/// "<program>: <what was wrong>" and then `usage` on stderr.
std::optional<int> parse(CLI::App& app, int argc, char** argv, std::string_view usage);

}  // namespace fairsem::examples
