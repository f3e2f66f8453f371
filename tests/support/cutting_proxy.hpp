#pragma once

// A loopback TCP proxy in front of a real redis-server that loses one reply on purpose, for the
// lost-reply tests: the request reaches Redis (so Redis runs it), but its reply never reaches
// the client, whose connection is closed instead. That is what a client sees when the network
// or the server side of its connection dies between running a command and delivering the
// answer. Not a Redis stand-in: every byte that is not cut comes from the real server.
//
// Every accepted connection gets its own upstream connection to 127.0.0.1:`upstream_port`;
// bytes are forwarded both ways by one thread. Requests (RESP arrays of bulk strings, or
// inline commands) and replies (RESP2) are framed so that the cut drops exactly the reply to
// the marked request: replies to earlier requests on the same connection still pass. This
// assumes one reply per request (no SUBSCRIBE, MONITOR or CLIENT REPLY OFF on a proxied
// connection); a byte stream that does not frame is forwarded as is and never cut.
//
// Loopback only; the proxy is meant for small, test-sized traffic (writes block the thread).

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace fairsem::test {

class CuttingProxy {
 public:
  /// Listens on a free port of 127.0.0.1 and forwards to 127.0.0.1:`upstream_port`.
  explicit CuttingProxy(int upstream_port);
  /// Closes every connection (clients see the server hang up) and joins the thread.
  ~CuttingProxy();
  CuttingProxy(const CuttingProxy&) = delete;
  CuttingProxy& operator=(const CuttingProxy&) = delete;

  int port() const noexcept { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

  /// Arms a one-shot cut. The next request whose command name is `command` (ASCII
  /// case-insensitive, e.g. "EVALSHA") and, unless `argument` is empty, one of whose other
  /// arguments equals `argument` exactly (e.g. "acquire") is forwarded to Redis as usual; its
  /// reply is then read in full, recorded (see dropped_replies) and not forwarded, and both
  /// sides of that connection are closed. Replaces a cut armed before that has not fired.
  void cut_reply_to(std::string command, std::string argument = {});
  /// Cancels an armed cut that has not fired.
  void disarm();
  /// Makes the next cut an outage: when it fires, every connection is closed, and new ones are
  /// accepted and closed at once (clients see the server hang up), until serve_again().
  void go_away_at_cut();
  /// Ends the outage go_away_at_cut() began: connections are forwarded again.
  void serve_again();
  /// True while that outage lasts.
  bool away() const;
  /// True while a cut is armed and has not fired.
  bool armed() const;

  /// Client connections accepted so far.
  std::size_t accepts() const;
  /// Complete requests seen from clients so far (all connections).
  std::size_t requests() const;
  /// Cuts performed so far.
  std::size_t cuts() const;
  /// The replies that were cut, as the server sent them (raw RESP), in order.
  std::vector<std::string> dropped_replies() const;

  /// Wait until at least `n` connections were accepted / `n` cuts were made; false on timeout.
  bool wait_for_accepts(std::size_t n, std::chrono::milliseconds timeout) const;
  bool wait_for_cuts(std::size_t n, std::chrono::milliseconds timeout) const;

 private:
  struct Trigger {
    std::string command;
    std::string argument;
  };
  struct Link;

  void run();
  void on_client_data(Link& link, const char* data, std::size_t size);
  void on_server_data(Link& link, const char* data, std::size_t size);
  bool matches_trigger(const std::vector<std::string>& args);

  int upstream_port_;
  int port_ = 0;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::optional<Trigger> trigger_;
  bool away_at_cut_ = false;
  bool away_ = false;
  std::size_t accepts_ = 0;
  std::size_t requests_ = 0;
  std::vector<std::string> dropped_;

  std::thread thread_;
};

}  // namespace fairsem::test
