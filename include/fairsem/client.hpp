#pragma once

// Client: one process's way to one Redis deployment, shared by every semaphore opened through
// it.

#include <memory>

#include "fairsem/connection_options.hpp"

namespace fairsem {

namespace detail {
class Runtime;
}  // namespace detail

class FairSemaphore;
class SemaphoreAdmin;

/// What the semaphores opened through it share: the connection options, one pool of idle
/// connections (per cluster slot), the cluster or sentinel routing, one wake-up thread and
/// connection (per cluster slot) whose one BRPOP waits for the wake-ups of every waiting
/// acquire, and one watchdog thread that renews the held permits of all of them, each at its
/// own renew interval. One Client per process and deployment is the normal use: a hundred
/// semaphores opened through one Client hold one watchdog thread, not a hundred, and a
/// thousand threads waiting in acquire() hold no connection of their own.
///
/// A handle: cheap to copy, and copies share everything. Thread-safe. What it shares lives as
/// long as its last user: a Client, a semaphore opened through it, or a Permit, so permits keep
/// being renewed after the Client and the semaphore are gone.
class Client {
 public:
  /// Validates the options (InvalidArgument naming the bad field). Connects nothing: the first
  /// semaphore opened through the Client does, and reports a bad address or password then.
  explicit Client(ConnectionOptions connection);

  /// The options every connection of this Client uses.
  const ConnectionOptions& connection() const noexcept;

 private:
  friend class FairSemaphore;
  friend class SemaphoreAdmin;

  std::shared_ptr<detail::Runtime> runtime_;
};

}  // namespace fairsem
