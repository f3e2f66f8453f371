#pragma once

// What this test process uses, for tests that bound it: its threads.

#include <dirent.h>

#include <cstddef>

namespace fairsem::test {

/// Threads of this process now (the entries of /proc/self/task).
inline std::size_t thread_count() {
  std::size_t n = 0;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n;
}

}  // namespace fairsem::test
