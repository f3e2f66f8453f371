#pragma once

// SigpipeGuard: SIGPIPE kept from killing the process while a Connection writes. Internal.
// Defined in sigpipe_guard-inl.hpp.

#include <signal.h>  // NOLINT(modernize-deprecated-headers): POSIX sigset_t

namespace fairsem::detail {

/// hiredis writes with write(2); writing to a socket the server has reset raises SIGPIPE, whose
/// default action kills the whole process. For the duration of one flush, SIGPIPE is blocked on
/// this thread and a SIGPIPE raised meanwhile is consumed, so the failed write surfaces as EPIPE
/// (a ConnectionError) and the application's own SIGPIPE handling is left alone.
class SigpipeGuard {
 public:
  SigpipeGuard() noexcept;
  ~SigpipeGuard();
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_mask_{};
  bool was_pending_ = false;
};

}  // namespace fairsem::detail
