#include "fault_proxy.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "loopback.hpp"

namespace fairsem::stress {
namespace {

using Clock = std::chrono::steady_clock;
using test::loopback;
using test::throw_errno;

struct Chunk {
  std::string bytes;
  Clock::time_point due;
};

/// One direction of a link: bytes read from `from`, waiting to be written to `to`.
struct Flow {
  int from = -1;
  int to = -1;
  std::deque<Chunk> queue;
  std::size_t written = 0;  // of queue.front()
};

struct Link {
  Flow up;    // client -> server
  Flow down;  // server -> client
  bool blackholed = false;
  Clock::time_point close_at{};
  bool dead = false;

  ~Link() {
    ::close(up.from);
    ::close(up.to);
  }
};

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

/// Writes what is due; false when the peer is gone.
bool flush(Flow& flow, Clock::time_point now) {
  while (!flow.queue.empty() && flow.queue.front().due <= now) {
    Chunk& c = flow.queue.front();
    const ssize_t n =
        ::send(flow.to, c.bytes.data() + flow.written, c.bytes.size() - flow.written, MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    flow.written += static_cast<std::size_t>(n);
    if (flow.written < c.bytes.size()) return true;  // the socket is full: wait for POLLOUT
    flow.queue.pop_front();
    flow.written = 0;
  }
  return true;
}

}  // namespace

FaultProxy::FaultProxy(int upstream_port) : upstream_port_(upstream_port) {
  listen_fd_ = test::listen_on_loopback(port_, SOCK_NONBLOCK, "FaultProxy");
  if (::pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    const int saved = errno;
    ::close(listen_fd_);
    errno = saved;
    throw_errno("FaultProxy: pipe2");
  }
  thread_ = std::thread([this] { run(); });
}

FaultProxy::~FaultProxy() {
  stopping_.store(true);
  const char c = 'x';
  [[maybe_unused]] const ssize_t n = ::write(wake_pipe_[1], &c, 1);
  thread_.join();
  ::close(listen_fd_);
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
}

void FaultProxy::set_delay(std::chrono::milliseconds delay) {
  std::lock_guard<std::mutex> lock(mu_);
  delay_ = delay;
}

void FaultProxy::cut_next_reply() {
  std::lock_guard<std::mutex> lock(mu_);
  cut_armed_ = true;
}

void FaultProxy::blackhole(std::chrono::milliseconds duration) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    blackhole_for_ = duration;
  }
  const char c = 'b';
  [[maybe_unused]] const ssize_t n = ::write(wake_pipe_[1], &c, 1);
}

void FaultProxy::run() {
  std::vector<std::unique_ptr<Link>> links;
  std::vector<pollfd> fds;
  std::vector<char> buf(64 * 1024);
  while (!stopping_.load()) {
    Clock::time_point now = Clock::now();
    std::chrono::milliseconds delay{0};
    bool cut = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      delay = delay_;
      cut = cut_armed_;
      if (blackhole_for_.count() > 0) {
        for (auto& l : links) {
          if (l->blackholed) continue;
          l->blackholed = true;
          l->close_at = now + blackhole_for_;
          l->up.queue.clear();
          l->down.queue.clear();
          blackholed_.fetch_add(1);
        }
        blackhole_for_ = std::chrono::milliseconds(0);
      }
    }

    // Poll: the wake pipe, new connections, and each link's sockets.
    fds.clear();
    fds.push_back({wake_pipe_[0], POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    auto timeout = std::chrono::milliseconds(50);
    for (auto& l : links) {
      for (Flow* f : {&l->up, &l->down}) {
        short events = POLLIN;
        if (!f->queue.empty()) {
          if (f->queue.front().due <= now) {
            events = static_cast<short>(events | POLLOUT);
          } else {
            timeout = std::min(timeout, std::chrono::duration_cast<std::chrono::milliseconds>(
                                            f->queue.front().due - now) +
                                            std::chrono::milliseconds(1));
          }
        }
        fds.push_back({f->from, POLLIN, 0});
        if (events & POLLOUT) fds.push_back({f->to, POLLOUT, 0});
      }
      if (l->blackholed) {
        timeout = std::min(
            timeout, std::chrono::duration_cast<std::chrono::milliseconds>(l->close_at - now) +
                         std::chrono::milliseconds(1));
      }
    }
    timeout = std::max(timeout, std::chrono::milliseconds(0));
    if (::poll(fds.data(), fds.size(), static_cast<int>(timeout.count())) < 0 && errno != EINTR) {
      break;
    }
    now = Clock::now();
    char drain[64];
    while (::read(wake_pipe_[0], drain, sizeof drain) > 0) {
    }

    // New connections, each with its own upstream connection.
    for (;;) {
      const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (client < 0) break;
      accepts_.fetch_add(1);
      const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in to = loopback(upstream_port_);
      if (server < 0 || ::connect(server, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
        if (server >= 0) ::close(server);
        ::close(client);  // Redis is down: the client sees the connection refused at once
        continue;
      }
      set_nonblocking(server);
      auto link = std::make_unique<Link>();
      link->up.from = client;
      link->up.to = server;
      link->down.from = server;
      link->down.to = client;
      links.push_back(std::move(link));
    }

    // Move bytes: read whatever arrived, queue it (delayed, cut or dropped), write what is due.
    for (auto& l : links) {
      if (l->blackholed && now >= l->close_at) l->dead = true;
      for (Flow* f : {&l->up, &l->down}) {
        if (l->dead) break;
        const ssize_t n = ::recv(f->from, buf.data(), buf.size(), 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          l->dead = true;
          break;
        }
        if (n > 0 && !l->blackholed) {
          std::size_t keep = static_cast<std::size_t>(n);
          const bool cutting = cut && f == &l->down && n >= 2;
          if (cutting) keep = static_cast<std::size_t>(n) / 2;
          f->queue.push_back({std::string(buf.data(), keep), cutting ? now : now + delay});
          if (cutting) {
            std::lock_guard<std::mutex> lock(mu_);
            cut_armed_ = false;
            cut = false;
            // Pass on what is queued before the half reply, then hang up.
            for (Chunk& c : f->queue) c.due = now;
            flush(*f, now);
            cuts_.fetch_add(1);
            l->dead = true;
            break;
          }
        }
        if (!flush(*f, now)) {
          l->dead = true;
          break;
        }
      }
    }
    links.erase(std::remove_if(links.begin(), links.end(), [](const auto& l) { return l->dead; }),
                links.end());
  }
}

}  // namespace fairsem::stress
