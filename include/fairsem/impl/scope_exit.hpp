#pragma once

// What undoes a step when the scope that took it ends, however it ends (a return, an
// exception): the one scope guard of the implementation. Internal.

#include <utility>

namespace fairsem::detail {

/// Calls `undo` when destroyed. `undo` must not throw.
template <class Undo>
class ScopeExit {
 public:
  explicit ScopeExit(Undo undo) noexcept(noexcept(Undo(std::move(undo))))
      : undo_(std::move(undo)) {}
  ~ScopeExit() { undo_(); }
  ScopeExit(const ScopeExit&) = delete;
  ScopeExit& operator=(const ScopeExit&) = delete;

 private:
  Undo undo_;
};

}  // namespace fairsem::detail
