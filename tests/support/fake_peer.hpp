#pragma once

// Loopback TCP peers that misbehave on purpose, for the connection-failure tests: one that
// accepts and never answers, one that hangs up at once, one that answers every connection with
// fixed bytes, and one whose accept queue is full so connecting hangs. Not a Redis stand-in:
// behaviour tests always use a real redis-server.

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace fairsem::test {

class FakePeer {
 public:
  enum class Mode {
    silent,       // accept, read and discard, never write
    hang_up,      // accept, close at once
    reply,        // accept, wait for the first bytes, write `reply`, then stay silent
    never_accept  // never accept; the accept queue is filled so new connects hang
  };

  /// Listens on 127.0.0.1:`port` (0: a free port; otherwise the port is reused, e.g. the port
  /// of a redis-server that was just killed).
  explicit FakePeer(Mode mode, std::string reply = {}, int port = 0);
  ~FakePeer();
  FakePeer(const FakePeer&) = delete;
  FakePeer& operator=(const FakePeer&) = delete;

  int port() const noexcept { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

  /// Connections accepted so far, and when.
  std::vector<std::chrono::steady_clock::time_point> accepts() const;
  /// Waits until at least `n` connections were accepted; false on timeout.
  bool wait_for_accepts(std::size_t n, std::chrono::milliseconds timeout) const;

 private:
  void run();

  Mode mode_;
  std::string reply_;
  int port_ = 0;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  std::vector<int> fillers_;  // never_accept: connections that fill the accept queue
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<std::chrono::steady_clock::time_point> accepts_;
  std::thread thread_;
};

}  // namespace fairsem::test
