#pragma once

// When a waiting acquire tries again instead of giving up: which failures pass (the server is
// restarting, loading, failing over, or the connection broke) and how long to pause between
// attempts (a bounded, jittered, capped backoff). No I/O, no clock, no threads: AcquireFsm
// (acquire_fsm.hpp) asks, and so does SemaphoreCore's background leave (a waiter that gave up
// while the server was down). Internal.

#include <chrono>
#include <cstdint>
#include <exception>
#include <string_view>

namespace fairsem::detail {

/// Whether an acquire's failure passes with time, so a waiter retries rather than gives up: a
/// connection-class error (refused, reset, timed out; not AuthError) or an error reply of a
/// server that is loading its data, busy with a script, failing over or demoted
/// (passes_reply). Anything else (credentials, a script's or the caller's error, a queue
/// refusal) does not.
bool passes(const std::exception_ptr& error) noexcept;
/// The server's side of passes(): LOADING, BUSY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN (as
/// is_transient), and READONLY or UNBLOCKED from a master turned replica.
bool passes_reply(std::string_view server_message) noexcept;

/// The pauses between retries: `first`, doubling after each failure up to `cap`, each drawn
/// between half and all of that (equal jitter, so that waiters cut off at once do not retry in
/// step). Deterministic for a seed (the unit tests); the drivers seed it at random.
class RetryBackoff {
 public:
  static constexpr std::chrono::milliseconds kFirst{50};
  static constexpr std::chrono::milliseconds kCap{1000};

  explicit RetryBackoff(std::uint64_t seed = 0, std::chrono::milliseconds first = kFirst,
                        std::chrono::milliseconds cap = kCap) noexcept;

  /// The pause before the next attempt, one failure later: in [ceiling / 2, ceiling], the
  /// ceiling `first` * 2^(failures so far), at most `cap`.
  std::chrono::milliseconds next() noexcept;
  /// After an attempt that worked: the next failure starts from `first` again.
  void reset() noexcept { failures_ = 0; }
  /// Failures since the last reset.
  int failures() const noexcept { return failures_; }

 private:
  std::uint64_t draw() noexcept;

  std::uint64_t state_;
  std::chrono::milliseconds first_;
  std::chrono::milliseconds cap_;
  int failures_ = 0;
};

}  // namespace fairsem::detail
