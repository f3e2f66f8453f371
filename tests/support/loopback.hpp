#pragma once

// Socket helpers shared by the loopback test peers (FakePeer, CuttingProxy).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace fairsem::test {

/// 127.0.0.1:`port` as a socket address.
inline sockaddr_in loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  return addr;
}

/// Throws std::runtime_error "`what`: <strerror(errno)>".
[[noreturn]] inline void throw_errno(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

/// A listening socket on 127.0.0.1 and a free port (`port` is set to it); `flags` go to
/// socket() with SOCK_CLOEXEC (e.g. SOCK_NONBLOCK). `who` names the caller in errors.
inline int listen_on_loopback(int& port, int flags, const std::string& who) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
  if (fd < 0) throw_errno(who + ": socket");
  sockaddr_in addr = loopback(0);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 128) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int saved = errno;
    ::close(fd);
    errno = saved;
    throw_errno(who + ": listen on 127.0.0.1");
  }
  port = ntohs(addr.sin_port);
  return fd;
}

}  // namespace fairsem::test
