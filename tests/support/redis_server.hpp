#pragma once

// Starts and stops real redis-server processes for the tests: a free loopback port, a private
// temp dir, no persistence unless a test asks for it. Loopback only.

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fairsem/connection_options.hpp"

namespace fairsem::test {

/// How a TLS server is started: it listens only for TLS (`--port 0 --tls-port PORT`), and
/// replicates, gossips (cluster bus) and, as a sentinel, talks to the nodes it watches over TLS
/// (`--tls-replication yes --tls-cluster yes`).
struct ServerTls {
  std::string cert_file;  // the server's certificate and key
  std::string key_file;
  std::string ca_file;        // the CA that client certificates must chain to
  bool auth_clients = false;  // --tls-auth-clients yes: a client certificate is required
  TlsOptions client;          // how the harness's own connections to it speak TLS
};

/// Variables ("NAME=VALUE") added to a server's environment, e.g. LD_PRELOAD of libfaketime.
struct ServerEnvironment {
  std::vector<std::string> variables;
};

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then released).
int free_loopback_port();

/// Whether nothing listens on (or is bound to) 127.0.0.1:`port` right now.
bool loopback_port_free(int port);

/// Absolute path of redis-server found in PATH; throws std::runtime_error saying how to
/// install it when it is missing.
std::string find_redis_server();

/// With FAIRSEM_TEST_TLS=1 (tls_requested() in test_certs.hpp), every server started without
/// a ServerTls of its own speaks TLS only, with the test certificates; url() and options() say
/// how to reach it.
class RedisServer {
 public:
  /// Starts redis-server on a free loopback port. `extra_args` are appended to the command
  /// line (e.g. {"--requirepass", "pw"} or {"--appendonly", "yes"}); "{dir}" in an argument
  /// stands for the server's private directory.
  explicit RedisServer(std::vector<std::string> extra_args = {});
  /// As above, started with a config file: `config` (with "{dir}" replaced) is written to
  /// config_path() before each start attempt of the constructor, and that path is the first
  /// argument, before the options. Sentinel needs this (extra_args {"--sentinel"}): it insists
  /// on a config file and rewrites it with what it learns, which start() then reuses.
  RedisServer(std::vector<std::string> extra_args, std::string config);
  /// As the first constructor, on a port `pick_port` chooses for each start attempt instead of
  /// any free one (a Redis 6.2 cluster node needs port + 10000 free for its bus).
  RedisServer(std::vector<std::string> extra_args, std::function<int()> pick_port);
  /// As the first constructor, speaking only TLS as `tls` says (port() is its TLS port; needs a
  /// redis-server built with TLS, as Debian's is), or with nullopt, plaintext whatever
  /// FAIRSEM_TEST_TLS says.
  RedisServer(std::optional<ServerTls> tls, std::vector<std::string> extra_args);
  /// As the first constructor, with `environment` added to the server's environment, and in
  /// plaintext whatever FAIRSEM_TEST_TLS says (under libfaketime, Debian's redis-server never
  /// passed the harness's readiness check over TLS; not looked into further).
  RedisServer(std::vector<std::string> extra_args, ServerEnvironment environment);
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const noexcept { return port_; }
  /// The redis-server binary it runs (found in PATH).
  const std::string& binary() const noexcept { return binary_; }
  const std::string& dir() const noexcept { return dir_; }
  pid_t pid() const noexcept { return pid_; }
  bool running() const noexcept { return pid_ > 0; }
  /// "redis://127.0.0.1:PORT", or for a TLS server "rediss://127.0.0.1:PORT?cacert=..." with
  /// the harness's client settings.
  std::string url() const;
  /// Options for 127.0.0.1:port() (with the harness's TLS settings for a TLS server).
  ConnectionOptions options() const;
  /// Path of the Unix socket when started with {"--unixsocket", "{dir}/redis.sock"}.
  std::string socket_path() const { return dir_ + "/redis.sock"; }
  /// The config file of a server started with one: "{dir}/redis.conf".
  std::string config_path() const { return dir_ + "/redis.conf"; }

  /// SIGTERM, then waits for the process to exit.
  void stop();
  /// SIGKILL (no shutdown work), then reaps the process.
  void kill();
  /// Starts again on the same port and directory (after stop() or kill()). Until then the
  /// harness keeps the port bound (not listening: a client is refused, as by a dead server), so
  /// that no other test's server takes it meanwhile and this test's clients reach that one.
  void start();
  /// As start(), but returns as soon as the server answers at all, LOADING included (its data
  /// set may still be loading: see key-load-delay and loading-process-events-interval-bytes).
  void start_loading();
  void restart() {
    stop();
    start();
  }
  /// The server's log so far, for failure messages.
  std::string log() const;

 private:
  /// The constructors' work: makes the private dir, then starts on a free port (a few tries).
  void launch(const std::optional<std::string>& config);
  bool try_start(bool until_loaded = true);
  void signal_and_reap(int signal);
  void wait_ready(bool until_loaded);
  void hold_port() noexcept;
  void release_port() noexcept;

  std::vector<std::string> extra_args_;
  bool has_config_ = false;
  std::function<int()> pick_port_;        // empty: free_loopback_port()
  std::optional<ServerTls> tls_;          // empty: plaintext
  std::vector<std::string> environment_;  // added to the server's environment
  std::string binary_;
  bool debug_command_option_ = false;  // --enable-debug-command local (Redis >= 7, Valkey)
  std::string dir_;
  int port_ = 0;
  int port_hold_ = -1;  // a socket bound to port_ while the server is down (hold_port())
  pid_t pid_ = -1;
  // The test process that started it: a child made by fork() (ForkTest) that exits runs this
  // object's destructor too, which must leave its parent's server alone.
  pid_t owner_ = ::getpid();
};

}  // namespace fairsem::test
