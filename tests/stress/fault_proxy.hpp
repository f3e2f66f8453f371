#pragma once

// A loopback TCP proxy in front of a real redis-server that injects network faults for the
// stress harness: it delays traffic, cuts a connection in the middle of a reply, and
// blackholes connections (bytes vanish, sockets stay open, then close). Every byte it does
// deliver comes from the real server or the real client. Loopback only.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <thread>

namespace fairsem::stress {

class FaultProxy {
 public:
  /// Listens on a free port of 127.0.0.1 and forwards to 127.0.0.1:`upstream_port`.
  explicit FaultProxy(int upstream_port);
  /// Closes every connection and joins the forwarding thread.
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  int port() const noexcept { return port_; }

  /// Holds every byte, both ways, for `delay` before passing it on; zero ends the delay.
  void set_delay(std::chrono::milliseconds delay);
  /// The next reply chunk from the server (on any connection) is passed on only in part, then
  /// both sides of that connection are closed.
  void cut_next_reply();
  /// Every open connection stops delivering anything, both ways, for `duration`; then it is
  /// closed. Connections opened meanwhile work normally.
  void blackhole(std::chrono::milliseconds duration);

  std::size_t accepts() const noexcept { return accepts_.load(); }
  std::size_t cuts() const noexcept { return cuts_.load(); }
  std::size_t blackholed() const noexcept { return blackholed_.load(); }

 private:
  void run();

  int upstream_port_;
  int port_ = 0;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  std::mutex mu_;  // guards the requests below
  std::chrono::milliseconds delay_{0};
  bool cut_armed_ = false;
  std::chrono::milliseconds blackhole_for_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<std::size_t> accepts_{0};
  std::atomic<std::size_t> cuts_{0};
  std::atomic<std::size_t> blackholed_{0};
  std::thread thread_;
};

}  // namespace fairsem::stress
