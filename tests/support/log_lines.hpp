#pragma once

// What fairsem hands to a semaphore's logger, collected for a test to assert on or to print
// when it fails: each line with the milliseconds since the collector was made.

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "fairsem/semaphore_options.hpp"

namespace fairsem::test {

class LogLines {
 public:
  /// A logger for SemaphoreOptions::logger; safe from any thread. The collector outlives it.
  Logger logger() {
    return [this](LogLevel, std::string_view message) { add(message, true); };
  }
  /// Puts what the test did (e.g. "the server is killed") among the timed lines, not lines().
  void note(std::string_view event) { add("[test] " + std::string(event), false); }
  /// The messages, in the order they came.
  std::vector<std::string> lines() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }
  /// Every message on a line of its own, after its time: for a failure's message.
  std::string timed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return timed_.empty() ? std::string("(nothing logged)\n") : timed_;
  }

 private:
  void add(std::string_view message, bool logged) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start_)
                        .count();
    std::lock_guard<std::mutex> lock(mu_);
    if (logged) lines_.emplace_back(message);
    timed_ += "+" + std::to_string(ms) + " ms: " + std::string(message) + "\n";
  }

  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
  std::string timed_;
};

}  // namespace fairsem::test
