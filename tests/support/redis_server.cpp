#include "redis_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/text.hpp"
#include "run_captured.hpp"
#include "server_build.hpp"
#include "test_certs.hpp"

namespace fairsem::test {

int free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int e = errno;
    ::close(fd);
    throw std::runtime_error(std::string("bind 127.0.0.1:0: ") + std::strerror(e));
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

bool loopback_port_free(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return bound;
}

std::string find_redis_server() {
  return find_in_path(
      "redis-server",
      "The integration tests need a real Redis: install the Debian package (apt-get install "
      "redis-server; scripts/test.sh does this), or point FAIRSEM_TEST_REDIS_URL at a server "
      "you run.");
}

namespace {

std::string replace_dir(std::string text, const std::string& dir) {
  for (std::size_t at; (at = text.find("{dir}")) != std::string::npos;) text.replace(at, 5, dir);
  return text;
}

}  // namespace

namespace {

/// FAIRSEM_TEST_TLS=1 (CI's TLS configuration): every server speaks TLS only.
std::optional<ServerTls> default_tls() {
  if (!tls_requested()) return std::nullopt;
  return TestCerts::get().server_tls();
}

}  // namespace

RedisServer::RedisServer(std::vector<std::string> extra_args)
    : extra_args_(std::move(extra_args)), tls_(default_tls()), binary_(find_redis_server()) {
  launch(std::nullopt);
}

RedisServer::RedisServer(std::vector<std::string> extra_args, std::string config)
    : extra_args_(std::move(extra_args)),
      has_config_(true),
      tls_(default_tls()),
      binary_(find_redis_server()) {
  launch(config);
}

RedisServer::RedisServer(std::vector<std::string> extra_args, std::function<int()> pick_port)
    : extra_args_(std::move(extra_args)),
      pick_port_(std::move(pick_port)),
      tls_(default_tls()),
      binary_(find_redis_server()) {
  launch(std::nullopt);
}

RedisServer::RedisServer(std::vector<std::string> extra_args, ServerEnvironment environment)
    : extra_args_(std::move(extra_args)),
      environment_(std::move(environment.variables)),
      binary_(find_redis_server()) {
  launch(std::nullopt);
}

RedisServer::RedisServer(std::optional<ServerTls> tls, std::vector<std::string> extra_args)
    : extra_args_(std::move(extra_args)), tls_(std::move(tls)), binary_(find_redis_server()) {
  launch(std::nullopt);
}

void RedisServer::launch(const std::optional<std::string>& config) {
  const ServerBuild& build = server_build(binary_);
  check_expected_server(build, binary_);
  // Redis 7 refuses DEBUG unless enabled, and the tests check that an ACL refuses it (with
  // NOPERM, not "DEBUG command not allowed"); Redis 6 allows it, and refuses the directive.
  debug_command_option_ = accepts_enable_debug_command(build);
  char tmpl[] = "/tmp/fairsem-redis-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  }
  dir_ = tmpl;
  // Another process may take the port between our probe and redis-server's bind: try a few.
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (config) {
      // Fresh for every attempt: a server that got as far as rewriting it leaves its own state.
      std::ofstream out(config_path(), std::ios::trunc);
      out << replace_dir(*config, dir_) << '\n';
      if (!out.flush()) {
        std::filesystem::remove_all(dir_);
        throw std::runtime_error("cannot write " + config_path());
      }
    }
    port_ = pick_port_ ? pick_port_() : free_loopback_port();
    try {
      if (try_start()) return;
    } catch (const WrongServerError&) {
      std::filesystem::remove_all(dir_);
      throw;
    }
  }
  std::string tail = log();
  std::filesystem::remove_all(dir_);
  throw std::runtime_error("redis-server did not start after 5 attempts; last log:\n" + tail);
}

RedisServer::~RedisServer() {
  if (::getpid() != owner_) return;
  try {
    stop();
  } catch (...) {
  }
  release_port();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string RedisServer::url() const {
  if (!tls_) return "redis://127.0.0.1:" + std::to_string(port_);
  return options().redacted_url();  // no password: the harness's own servers need none
}

ConnectionOptions RedisServer::options() const {
  ConnectionOptions opts;
  opts.port = port_;
  if (tls_) opts.tls = tls_->client;
  return opts;
}

std::string RedisServer::log() const {
  std::ifstream in(dir_ + "/redis.log");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void RedisServer::start() {
  if (running()) return;
  if (!try_start()) throw std::runtime_error("redis-server failed to restart:\n" + log());
}

void RedisServer::start_loading() {
  if (running()) return;
  if (!try_start(false)) throw std::runtime_error("redis-server failed to restart:\n" + log());
}

bool RedisServer::try_start(bool until_loaded) {
  std::vector<std::string> args = {binary_};
  if (has_config_) args.push_back(config_path());
  // One word per value: Redis 6.2 reads "127.0.0.1 -::1" in one word as one address.
  if (tls_) {
    // With no plaintext port, its links to its peers are TLS too: a replica's to its master, a
    // sentinel's to the masters, replicas and other sentinels (both tls-replication), and the
    // cluster bus and MIGRATE (tls-cluster, which also makes the cluster announce the TLS port
    // in CLUSTER SLOTS and redirections). Redis presents the server's certificate as its client
    // certificate there, so peers with --tls-auth-clients yes accept it. Inert on a standalone
    // server.
    args.insert(args.end(),
                {"--port", "0", "--tls-port", std::to_string(port_), "--tls-cert-file",
                 tls_->cert_file, "--tls-key-file", tls_->key_file, "--tls-ca-cert-file",
                 tls_->ca_file, "--tls-auth-clients", tls_->auth_clients ? "yes" : "no",
                 "--tls-replication", "yes", "--tls-cluster", "yes"});
  } else {
    args.insert(args.end(), {"--port", std::to_string(port_)});
  }
  args.insert(args.end(), {"--bind", "127.0.0.1", "-::1", "--dir", dir_, "--save", "",
                           "--appendonly", "no", "--daemonize", "no", "--logfile", ""});
  if (debug_command_option_) args.insert(args.end(), {"--enable-debug-command", "local"});
  for (const std::string& arg : extra_args_) args.push_back(replace_dir(arg, dir_));
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The environment, built before fork(): the child only calls exec.
  std::vector<std::string> environment = environment_;
  for (char** var = environ; *var != nullptr; ++var) environment.emplace_back(*var);
  std::vector<char*> envp;
  for (auto& var : environment) envp.push_back(var.data());
  envp.push_back(nullptr);
  const std::string log_path = dir_ + "/redis.log";

  release_port();
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // Never outlive the test process, even if it crashes.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() == 1) _exit(127);  // the test process died before prctl took effect
    // Do not hand the test's own sockets (hiredis connections, fake peers) to the server.
    for (int open_fd = 3; open_fd < 1024; ++open_fd) ::close(open_fd);
    int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      ::close(fd);
    }
    ::execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  pid_ = pid;
  try {
    wait_ready(until_loaded);
    return true;
  } catch (const WrongServerError&) {
    kill();
    throw;
  } catch (const std::exception&) {
    if (pid_ > 0) kill();
    return false;
  }
}

void RedisServer::wait_ready(bool until_loaded) {
  ConnectionOptions opts = options();
  opts.connect_timeout = std::chrono::milliseconds(200);
  opts.command_timeout = std::chrono::milliseconds(500);
  opts.reconnect_attempts = 1;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("redis-server exited during start-up");
    }
    try {
      detail::Connection conn(opts);
      // If another test's server took the port first, this is not ours: do not use it.
      const std::string info = conn.command({"INFO", "server"}).str;
      if (info.find("process_id:" + std::to_string(pid_) + "\r\n") == std::string::npos) {
        throw std::runtime_error("port " + std::to_string(port_) + " is another server's");
      }
      check_expected_server(info, binary_ + " on 127.0.0.1:" + std::to_string(port_));
      return;
    } catch (const AuthError&) {
      // Refusing an unauthenticated command (started with --requirepass) means it is up.
      return;
    } catch (const ReplyError& e) {
      // Answering at all means it is up, unless it is still loading its data set.
      if (!until_loaded || !detail::starts_with(e.server_message(), "LOADING")) return;
    } catch (const Error&) {
      // not accepting connections yet
    }
    // Polling an external process's readiness: there is no event to wait on.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  throw std::runtime_error("redis-server did not answer PING within 20 s");
}

void RedisServer::stop() { signal_and_reap(SIGTERM); }

void RedisServer::kill() { signal_and_reap(SIGKILL); }

void RedisServer::signal_and_reap(int signal) {
  if (pid_ <= 0) return;
  ::kill(pid_, signal);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  hold_port();
}

// A test that stops its server and starts it again keeps the port: freed for seconds, it could
// be taken by another test's server (ctest runs several at once), which this test's clients
// would then reach instead (the likely cause, not proven, of a RideOutTest run whose background
// leaves found nothing to remove and whose waiters expired). A socket bound to the port, not
// listening, keeps every other bind off it (the harness's free-port probes bind without
// SO_REUSEADDR) while a client's connect is refused as by a dead server. SO_REUSEADDR: the dead
// server's connections may sit in TIME_WAIT on the port. Best effort: if the bind fails, the
// port is left as it is.
void RedisServer::hold_port() noexcept {
  if (port_hold_ >= 0 || port_ <= 0) return;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port_));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return;
  }
  port_hold_ = fd;
}

void RedisServer::release_port() noexcept {
  if (port_hold_ < 0) return;
  ::close(port_hold_);
  port_hold_ = -1;
}

}  // namespace fairsem::test
