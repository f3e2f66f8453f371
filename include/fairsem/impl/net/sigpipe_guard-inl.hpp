#pragma once

// SigpipeGuard (sigpipe_guard.hpp).

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/net/sigpipe_guard.hpp"

#include <pthread.h>

#include <cerrno>
#include <ctime>

namespace fairsem::detail {

FAIRSEM_INLINE SigpipeGuard::SigpipeGuard() noexcept {
  sigemptyset(&pipe_);
  sigaddset(&pipe_, SIGPIPE);
  sigset_t pending;
  sigemptyset(&pending);
  sigpending(&pending);
  was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  pthread_sigmask(SIG_BLOCK, &pipe_, &old_mask_);
}

FAIRSEM_INLINE SigpipeGuard::~SigpipeGuard() {
  if (!was_pending_) {
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE) == 1) {
      const timespec zero{};
      while (sigtimedwait(&pipe_, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

}  // namespace fairsem::detail
