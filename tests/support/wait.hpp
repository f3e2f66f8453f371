#pragma once

// Waiting for a condition in tests: poll it, with a generous bound, instead of sleeping for a
// guessed time. The bound only turns a hang into a failure; it is not a speed assertion.

#include <chrono>
#include <thread>

namespace fairsem::test {

/// Polls `done` every 5 ms until it returns true (then true) or `timeout` passes (then false).
template <class Predicate, class Rep = long long, class Period = std::milli>
bool wait_until(Predicate done,
                std::chrono::duration<Rep, Period> timeout = std::chrono::milliseconds(30000)) {
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace fairsem::test
