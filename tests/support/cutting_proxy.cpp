#include "cutting_proxy.hpp"

#include "loopback.hpp"
#include "words.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace fairsem::test {
namespace {

constexpr std::size_t kNoFrame = static_cast<std::size_t>(-1);  // the bytes are not RESP

[[noreturn]] void proxy_fail(const char* what) {
  throw_errno("CuttingProxy: " + std::string(what));
}

bool parse_length(std::string_view s, long long& out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && ptr == end;
}

/// End offset of the RESP2 reply that starts at `pos`; 0 while it is incomplete; kNoFrame
/// when the bytes are not a RESP2 reply.
std::size_t reply_end(std::string_view buf, std::size_t pos) {
  if (pos >= buf.size()) return 0;
  const std::size_t eol = buf.find("\r\n", pos);
  if (eol == std::string_view::npos) return 0;
  const std::string_view line = buf.substr(pos + 1, eol - pos - 1);
  std::size_t next = eol + 2;
  long long n = 0;
  switch (buf[pos]) {
    case '+':
    case '-':
    case ':':
      return next;
    case '$':
      if (!parse_length(line, n)) return kNoFrame;
      if (n < 0) return next;
      if (buf.size() - next < static_cast<std::size_t>(n) + 2) return 0;
      return next + static_cast<std::size_t>(n) + 2;
    case '*':
      if (!parse_length(line, n)) return kNoFrame;
      for (long long i = 0; i < n; ++i) {
        const std::size_t end = reply_end(buf, next);
        if (end == 0 || end == kNoFrame) return end;
        next = end;
      }
      return next;
    default:
      return kNoFrame;
  }
}

/// Length of the first complete request in `buf` (a RESP array of bulk strings, or an inline
/// command line), with its arguments in `args`; 0 while it is incomplete; kNoFrame when the
/// bytes are not a request.
std::size_t request_end(std::string_view buf, std::vector<std::string>& args) {
  args.clear();
  const std::size_t eol = buf.find("\r\n");
  if (buf.empty()) return 0;
  if (buf[0] != '*') {
    const std::size_t nl = buf.find('\n');
    if (nl == std::string_view::npos) return 0;
    std::string_view line = buf.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    args = split_words(line);
    return nl + 1;
  }
  if (eol == std::string_view::npos) return 0;
  long long count = 0;
  if (!parse_length(buf.substr(1, eol - 1), count) || count < 0) return kNoFrame;
  std::size_t pos = eol + 2;
  for (long long i = 0; i < count; ++i) {
    if (pos >= buf.size()) return 0;
    if (buf[pos] != '$') return kNoFrame;
    const std::size_t len_end = buf.find("\r\n", pos);
    if (len_end == std::string_view::npos) return 0;
    long long len = 0;
    if (!parse_length(buf.substr(pos + 1, len_end - pos - 1), len) || len < 0) return kNoFrame;
    const std::size_t data = len_end + 2;
    if (buf.size() - data < static_cast<std::size_t>(len) + 2) return 0;
    args.emplace_back(buf.substr(data, static_cast<std::size_t>(len)));
    pos = data + static_cast<std::size_t>(len) + 2;
  }
  return pos;
}

bool equal_nocase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    char y = b[i];
    if (x >= 'a' && x <= 'z') x = static_cast<char>(x - 'a' + 'A');
    if (y >= 'a' && y <= 'z') y = static_cast<char>(y - 'a' + 'A');
    if (x != y) return false;
  }
  return true;
}

/// Writes everything (the sockets are blocking); false when the peer is gone.
bool send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

/// One proxied connection: the accepted client socket and its upstream socket.
struct CuttingProxy::Link {
  int client = -1;
  int server = -1;
  bool framed = true;                 // false once a byte stream did not parse: forwarded as is
  std::string requests;               // client bytes not yet framed into a complete request
  std::string replies;                // server bytes not yet framed into a complete reply
  std::size_t sent = 0;               // complete requests forwarded on this connection
  std::size_t replied = 0;            // complete replies forwarded on this connection
  std::optional<std::size_t> cut_at;  // index of the request whose reply is to be dropped

  bool open() const noexcept { return client >= 0; }
  void close() noexcept {
    if (client >= 0) ::close(client);
    if (server >= 0) ::close(server);
    client = -1;
    server = -1;
  }
};

CuttingProxy::CuttingProxy(int upstream_port) : upstream_port_(upstream_port) {
  listen_fd_ = listen_on_loopback(port_, 0, "CuttingProxy");
  if (::pipe2(wake_pipe_, O_CLOEXEC) != 0) {
    const int saved = errno;
    ::close(listen_fd_);
    errno = saved;
    proxy_fail("pipe2");
  }
  thread_ = std::thread([this] { run(); });
}

CuttingProxy::~CuttingProxy() {
  char c = 'x';
  while (::write(wake_pipe_[1], &c, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
  ::close(listen_fd_);
}

void CuttingProxy::cut_reply_to(std::string command, std::string argument) {
  std::lock_guard<std::mutex> lock(mu_);
  trigger_ = Trigger{std::move(command), std::move(argument)};
}

void CuttingProxy::disarm() {
  std::lock_guard<std::mutex> lock(mu_);
  trigger_.reset();
}

void CuttingProxy::go_away_at_cut() {
  std::lock_guard<std::mutex> lock(mu_);
  away_at_cut_ = true;
}

void CuttingProxy::serve_again() {
  std::lock_guard<std::mutex> lock(mu_);
  away_at_cut_ = false;
  away_ = false;
}

bool CuttingProxy::away() const {
  std::lock_guard<std::mutex> lock(mu_);
  return away_;
}

bool CuttingProxy::armed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return trigger_.has_value();
}

std::size_t CuttingProxy::accepts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return accepts_;
}

std::size_t CuttingProxy::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

std::size_t CuttingProxy::cuts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_.size();
}

std::vector<std::string> CuttingProxy::dropped_replies() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

bool CuttingProxy::wait_for_accepts(std::size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return accepts_ >= n; });
}

bool CuttingProxy::wait_for_cuts(std::size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return dropped_.size() >= n; });
}

bool CuttingProxy::matches_trigger(const std::vector<std::string>& args) {
  // Called with mu_ held.
  if (!trigger_ || args.empty() || !equal_nocase(args[0], trigger_->command)) return false;
  if (trigger_->argument.empty()) return true;
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i] == trigger_->argument) return true;
  }
  return false;
}

void CuttingProxy::on_client_data(Link& link, const char* data, std::size_t size) {
  // Frame first, forward second: the server cannot answer a request before it has all of it,
  // and this thread reads the answer only after marking the request.
  if (link.framed) {
    link.requests.append(data, size);
    std::vector<std::string> args;
    std::size_t used = 0;
    std::size_t seen = 0;
    for (;;) {
      const std::size_t end = request_end(std::string_view(link.requests).substr(used), args);
      if (end == kNoFrame) {
        link.framed = false;
        link.cut_at.reset();
        break;
      }
      if (end == 0) break;
      used += end;
      ++seen;
      std::lock_guard<std::mutex> lock(mu_);
      if (!link.cut_at && matches_trigger(args)) {
        link.cut_at = link.sent;
        trigger_.reset();
      }
      ++link.sent;
    }
    link.requests.erase(0, used);
    if (!link.framed) link.requests.clear();
    std::lock_guard<std::mutex> lock(mu_);
    requests_ += seen;
  }
  if (!send_all(link.server, std::string_view(data, size))) link.close();
}

void CuttingProxy::on_server_data(Link& link, const char* data, std::size_t size) {
  if (!link.framed) {
    if (!send_all(link.client, std::string_view(data, size))) link.close();
    return;
  }
  link.replies.append(data, size);
  std::size_t used = 0;
  for (;;) {
    const std::size_t end = reply_end(link.replies, used);
    if (end == kNoFrame) {
      link.framed = false;
      used = link.replies.size();  // the rest goes through unframed
      break;
    }
    if (end == 0) break;
    if (link.cut_at && *link.cut_at == link.replied) {
      // The reply to the marked request: forward what came before it, drop it, hang up.
      send_all(link.client, std::string_view(link.replies).substr(0, used));
      {
        std::lock_guard<std::mutex> lock(mu_);
        dropped_.push_back(link.replies.substr(used, end - used));
        if (std::exchange(away_at_cut_, false)) away_ = true;
      }
      cv_.notify_all();
      link.close();
      return;
    }
    used = end;
    ++link.replied;
  }
  const bool ok = send_all(link.client, std::string_view(link.replies).substr(0, used));
  link.replies.erase(0, used);
  if (!link.framed) link.replies.clear();
  if (!ok) link.close();
}

void CuttingProxy::run() {
  std::vector<std::unique_ptr<Link>> links;
  std::vector<char> buf(64 * 1024);
  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({wake_pipe_[0], POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (const auto& link : links) {
      fds.push_back({link->client, POLLIN, 0});
      fds.push_back({link->server, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents != 0) break;
    for (std::size_t k = 0; k < links.size(); ++k) {
      for (int side = 0; side < 2; ++side) {
        Link& link = *links[k];
        if (!link.open() || fds[2 + 2 * k + static_cast<std::size_t>(side)].revents == 0) {
          continue;
        }
        const int from = side == 0 ? link.client : link.server;
        const ssize_t n = ::recv(from, buf.data(), buf.size(), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          link.close();  // either side hung up or failed: so does the other
        } else if (side == 0) {
          on_client_data(link, buf.data(), static_cast<std::size_t>(n));
        } else {
          on_server_data(link, buf.data(), static_cast<std::size_t>(n));
        }
      }
    }
    bool away = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      away = away_;
    }
    if (away) {
      for (auto& link : links) link->close();  // the outage of go_away_at_cut()
    }
    for (std::size_t k = links.size(); k-- > 0;) {
      if (!links[k]->open()) links.erase(links.begin() + static_cast<std::ptrdiff_t>(k));
    }
    if (fds[1].revents != 0) {
      const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++accepts_;
      }
      cv_.notify_all();
      if (away) {
        ::close(client);
        continue;
      }
      const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in to = loopback(upstream_port_);
      if (server < 0 || ::connect(server, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
        if (server >= 0) ::close(server);
        ::close(client);  // the client sees the "server" hang up
        continue;
      }
      auto link = std::make_unique<Link>();
      link->client = client;
      link->server = server;
      links.push_back(std::move(link));
    }
  }
  for (auto& link : links) link->close();
}

}  // namespace fairsem::test
