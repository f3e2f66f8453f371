#pragma once

// Socket helpers shared by the loopback test peers (FakePeer, CuttingProxy).

#include <arpa/inet.h>
#include <netinet/in.h>

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

}  // namespace fairsem::test
