#pragma once

// fork(): the process a Client and everything opened through it belong to. A process made by
// fork() has copies of its parent's fairsem objects, but not their threads (only the thread that
// forked exists in the child), and their sockets are shared with the parent: the child may
// neither use them (every call throws ForkedProcessError) nor destroy them (a destructor would
// join threads that do not exist, take a lock a parent's thread held at the fork, or release the
// parent's permits). Its destructors abandon them instead. Internal.

#include <sys/types.h>

#include <memory>
#include <string_view>

namespace fairsem::detail {

class OwnerProcess {
 public:
  /// The process running now.
  OwnerProcess() noexcept;
  /// Whether the process running now is the owner (not a child made by fork() since).
  bool here() const noexcept;
  /// Throws ForkedProcessError, saying what `what` (e.g. "this Client") is, unless here().
  void check(std::string_view what) const;

 private:
  pid_t pid_;
};

/// Keeps `object` alive, never destroyed, for the rest of the process: a forked child's copy of
/// one of its parent's objects.
void abandon(std::shared_ptr<void> object) noexcept;

}  // namespace fairsem::detail
