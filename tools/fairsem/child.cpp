// `fairsem run`'s command: its environment and how it is started (see child.hpp).

#include "child.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spawn.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <string_view>

namespace fairsem::cli {

namespace {

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::vector<std::string> child_environment(const Permit& permit) {
  static constexpr std::array<std::string_view, 5> kOurs = {
      "FAIRSEM_PERMIT_ID=", "FAIRSEM_FENCING_TOKEN=", "FAIRSEM_PERMITS=", "FAIRSEM_SLOTS=",
      "FAIRSEM_SLOT="};
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry = *e;
    const auto ours = [&](std::string_view name) { return entry.rfind(name, 0) == 0; };
    if (std::any_of(kOurs.begin(), kOurs.end(), ours)) continue;
    env.emplace_back(entry);
  }
  env.push_back("FAIRSEM_PERMIT_ID=" + permit.id());
  env.push_back(fmt::format("FAIRSEM_FENCING_TOKEN={}", permit.fencing_token()));
  env.push_back(fmt::format("FAIRSEM_PERMITS={}", permit.count()));
  env.push_back(fmt::format("FAIRSEM_SLOTS={}", fmt::join(permit.slots(), ",")));
  env.push_back(fmt::format("FAIRSEM_SLOT={}", permit.slot()));
  return env;
}

Started start_command(const std::vector<std::string>& command, std::vector<std::string> env,
                      const sigset_t& defaults_in) {
  std::vector<std::string> argv_strings = command;
  std::vector<char*> argv_ptrs = pointers(argv_strings);
  std::vector<char*> env_ptrs = pointers(env);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  sigset_t defaults = defaults_in;
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  // The command inherits no descriptor beyond 0-2: hiredis does not mark its sockets
  // close-on-exec, and they carry this process's authenticated Redis connections.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_t* file_actions = nullptr;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  if (posix_spawn_file_actions_addclosefrom_np(&actions, 3) == 0) file_actions = &actions;
#endif
  pid_t pid = -1;
  const int rc =
      posix_spawnp(&pid, argv_ptrs[0], file_actions, &attr, argv_ptrs.data(), env_ptrs.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Started{-1, rc};
  return Started{pid, 0};
}

}  // namespace fairsem::cli
