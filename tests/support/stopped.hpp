#pragma once

// A hung server for tests: SIGSTOP a process for an object's lifetime. The kernel still accepts
// connections for it, but nothing answers, as with a server that hangs.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>

namespace fairsem::test {

/// SIGSTOPs `pid` now; SIGCONT at resume() or, at the latest, when destroyed (so that a test
/// that ends early leaves no process stopped for the harness to wait on).
class Stopped {
 public:
  explicit Stopped(pid_t pid) : pid_(pid) { EXPECT_EQ(::kill(pid_, SIGSTOP), 0); }
  ~Stopped() { resume(); }
  Stopped(const Stopped&) = delete;
  Stopped& operator=(const Stopped&) = delete;

  void resume() {
    if (pid_ > 0) {
      EXPECT_EQ(::kill(pid_, SIGCONT), 0);
    }
    pid_ = -1;
  }

 private:
  pid_t pid_;
};

}  // namespace fairsem::test
