#pragma once

// Runs a program to completion and collects what it prints: for the harness's own uses of
// redis-server and redis-cli (--version, --cluster create).

#include <chrono>
#include <string>
#include <vector>

namespace fairsem::test {

struct RunResult {
  int status = 0;
  bool timed_out = false;
  std::string output;  // stdout and stderr, interleaved
};

/// Absolute path of `program` found in PATH; throws std::runtime_error "<program> was not
/// found in PATH. <hint>" when it is missing.
std::string find_in_path(const std::string& program, const std::string& hint);

/// Runs `argv` (argv[0] an absolute path) to completion, stdin from /dev/null, collecting its
/// output; SIGKILLs it after `timeout`. The child dies with the calling process.
RunResult run_captured(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

}  // namespace fairsem::test
