#pragma once

// `fairsem run`'s command: the environment it gets (the permit's id, fencing token, units and
// slots) and how it is started.

#include <signal.h>  // NOLINT(modernize-deprecated-headers): POSIX sigset_t
#include <sys/types.h>

#include <string>
#include <vector>

#include "fairsem/permit.hpp"

namespace fairsem::cli {

/// environ, with FAIRSEM_PERMIT_ID, FAIRSEM_FENCING_TOKEN, FAIRSEM_PERMITS, FAIRSEM_SLOTS and
/// FAIRSEM_SLOT set for the command (values inherited from an enclosing `fairsem run` are
/// replaced, not duplicated: with two entries of one name, getenv() would find the stale one
/// first).
std::vector<std::string> child_environment(const Permit& permit);

/// How starting the command went: its pid, or the error posix_spawn gave (error != 0).
struct Started {
  pid_t pid = -1;
  int error = 0;
};

/// Starts `command` (searched in PATH) with environment `env`, no signal blocked, the signals in
/// `defaults` and SIGPIPE reset to their default actions (one ignored by this process and left
/// out of `defaults` stays ignored), and no descriptor beyond 0-2.
Started start_command(const std::vector<std::string>& command, std::vector<std::string> env,
                      const sigset_t& defaults);

}  // namespace fairsem::cli
