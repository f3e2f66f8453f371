#include "private_redis.hpp"

#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>  // NOLINT(modernize-deprecated-headers): POSIX sigset_t, kill
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fairsem/fairsem.hpp>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace fairsem::cli {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

int free_loopback_port() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int saved = errno;
    close(fd);
    throw std::system_error(saved, std::generic_category(), "bind to 127.0.0.1:0");
  }
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace

PrivateRedis::PrivateRedis() {
  std::string dir_template = "/tmp/fairsem-demo-XXXXXX";
  if (mkdtemp(dir_template.data()) == nullptr) {
    throw std::system_error(errno, std::generic_category(), "mkdtemp");
  }
  dir_ = dir_template;
  try {
    start();
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    throw;
  }
}

void PrivateRedis::start() {
  port_ = free_loopback_port();
  std::vector<std::string> args = {
      "redis-server", "--port",    std::to_string(port_), "--bind", "127.0.0.1",
      "--save",       "",          "--appendonly",        "no",     "--dir",
      dir_,           "--logfile", dir_ + "/redis.log"};
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) throw std::system_error(errno, std::generic_category(), "fork");
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlives the demo
    if (getppid() != parent) _exit(126);
    setpgid(0, 0);  // a Ctrl-C on the terminal is the demo's to handle, not the server's
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, nullptr);
    execvp(argv[0], argv.data());
    _exit(errno == ENOENT ? 127 : 126);
  }
  url_ = fmt::format("redis://127.0.0.1:{}", port_);
}

PrivateRedis::~PrivateRedis() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void PrivateRedis::wait_until_ready() {
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  for (;;) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw ConnectionError(
          WIFEXITED(status) && WEXITSTATUS(status) == 127
              ? std::string("redis-server was not found in PATH; install the Debian package "
                            "redis-server, or pass --url")
              : fmt::format("the private redis-server exited at start ({})", log_tail()));
    }
    try {
      ConnectionOptions o = ConnectionOptions::from_url(url_);
      o.reconnect_attempts = 1;
      (void)SemaphoreAdmin(o, "ping");  // connects: the server is up
      return;
    } catch (const ConnectionError&) {
      if (Clock::now() > give_up) {
        throw ConnectionError(
            fmt::format("the private redis-server on {} did not answer "
                        "within 10 s ({})",
                        url_, log_tail()));
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
  }
}

std::string PrivateRedis::log_tail() const {
  std::ifstream log(dir_ + "/redis.log");
  if (!log) return "no log";
  std::string text;
  for (std::string line; std::getline(log, line);) text = line;  // the last line
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text.empty() ? "empty log" : text;
}

}  // namespace fairsem::cli
