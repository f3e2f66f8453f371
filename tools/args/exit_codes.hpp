#pragma once

// The exit codes of the example programs and of the `fairsem` tool: sysexits(3) codes, as the
// programs' comments, `fairsem --help` and docs/cli.md document them.

namespace fairsem::args {

inline constexpr int kExitUsage = 64;        // bad arguments (nothing was sent to Redis)
inline constexpr int kExitUnavailable = 69;  // Redis unreachable, or authentication refused
inline constexpr int kExitInternal = 70;     // anything unexpected
inline constexpr int kExitTempFail = 75;     // no permit in time, or the permit lost

}  // namespace fairsem::args
