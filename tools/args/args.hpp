#pragma once

// Command lines of the example programs and of the `fairsem` tool: the Redis URL's default
// chain, whole numbers in a range, and parsing with CLI11 into values or an exit code (the
// codes are in exit_codes.hpp). Public fairsem API only, like the programs themselves. Only
// the file that parses a program's arguments includes it: CLI11 takes seconds to compile.

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <string_view>

#include "exit_codes.hpp"

namespace fairsem::args {

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

/// A tenant (fairsem::SemaphoreOptions::tenant: at most kMaxTenantLength bytes, no control
/// bytes; "" is the default tenant). Its message quotes the value, control bytes as \xNN.
CLI::Validator tenant_name();

/// `message` with every URL among the arguments shown without its credentials: CLI11 quotes
/// arguments verbatim, so a URL in the wrong place would show its password.
std::string hide_credentials(std::string message, int argc, char** argv);

/// Parses argv into `app`. Returns nullopt to go on, or the exit code to return at once: 0
/// after --help printed the help on stdout; kExitUsage after a bad argument printed
/// "<program>: <what was wrong>" and then `usage` on stderr.
std::optional<int> parse(CLI::App& app, int argc, char** argv, std::string_view usage);

}  // namespace fairsem::args
