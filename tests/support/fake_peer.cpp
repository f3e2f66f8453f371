#include "fake_peer.hpp"

#include "loopback.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace fairsem::test {
namespace {

[[noreturn]] void sys_fail(const char* what) { throw_errno(std::string(what)); }

}  // namespace

FakePeer::FakePeer(Mode mode, std::string reply, int port) : mode_(mode), reply_(std::move(reply)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) sys_fail("socket");
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr = loopback(port);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) sys_fail("bind");
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  if (::listen(listen_fd_, mode_ == Mode::never_accept ? 0 : 64) != 0) sys_fail("listen");

  if (mode_ == Mode::never_accept) {
    // With a backlog of 0 the kernel queues one connection; once the queue is full it drops
    // further SYNs, so the next connect() gets no answer at all. Fill the queue.
    for (int i = 0; i < 2; ++i) {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      sockaddr_in to = loopback(port_);
      ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to);
      fillers_.push_back(fd);
    }
    return;
  }
  if (::pipe2(wake_pipe_, O_CLOEXEC) != 0) sys_fail("pipe2");
  thread_ = std::thread([this] { run(); });
}

FakePeer::~FakePeer() {
  if (thread_.joinable()) {
    char c = 'x';
    (void)::write(wake_pipe_[1], &c, 1);
    thread_.join();
  }
  for (int fd : fillers_) ::close(fd);
  for (int fd : wake_pipe_) {
    if (fd >= 0) ::close(fd);
  }
  ::close(listen_fd_);
}

std::vector<std::chrono::steady_clock::time_point> FakePeer::accepts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return accepts_;
}

bool FakePeer::wait_for_accepts(std::size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return accepts_.size() >= n; });
}

void FakePeer::run() {
  std::vector<int> open;  // accepted connections kept open
  std::vector<bool> answered;
  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({wake_pipe_[0], POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (int fd : open) fds.push_back({fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents != 0) break;
    for (std::size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      char buf[4096];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      std::size_t k = i - 2;
      if (n <= 0) {
        ::close(open[k]);
        open[k] = -1;
      } else if (mode_ == Mode::reply && !answered[k]) {
        answered[k] = true;
        // send(), not write(): a client that hangs up mid-reply must not SIGPIPE the tests.
        (void)::send(open[k], reply_.data(), reply_.size(), MSG_NOSIGNAL);
      }
    }
    for (std::size_t k = open.size(); k-- > 0;) {
      if (open[k] < 0) {
        open.erase(open.begin() + static_cast<std::ptrdiff_t>(k));
        answered.erase(answered.begin() + static_cast<std::ptrdiff_t>(k));
      }
    }
    if (fds[1].revents != 0) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      {
        std::lock_guard<std::mutex> lock(mu_);
        accepts_.push_back(std::chrono::steady_clock::now());
      }
      cv_.notify_all();
      if (mode_ == Mode::hang_up) {
        ::close(fd);
      } else {
        open.push_back(fd);
        answered.push_back(false);
      }
    }
  }
  for (int fd : open) ::close(fd);
}

}  // namespace fairsem::test
