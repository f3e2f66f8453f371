#pragma once

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/net/hiredis_context.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <new>

#include "fairsem/errors.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/net/hiredis_reply.hpp"
#include "fairsem/impl/net/tls.hpp"

namespace fairsem::detail {

FAIRSEM_INLINE void ContextDeleter::operator()(redisContext* ctx) const noexcept { redisFree(ctx); }

namespace hiredis_context_helpers {

FAIRSEM_INLINE bool is_timeout(const redisContext& ctx, int saved_errno, bool connecting) {
#if HIREDIS_MAJOR >= 1
  if (ctx.err == REDIS_ERR_TIMEOUT) return true;
#endif
  if (ctx.err != REDIS_ERR_IO) return false;
  // hiredis 0.x reports an expired connect as an I/O error with ETIMEDOUT. EAGAIN while
  // connecting is an immediate failure (a full Unix-socket backlog), not a timeout.
  if (connecting) return saved_errno == ETIMEDOUT;
  // An expired SO_RCVTIMEO/SO_SNDTIMEO shows up as EAGAIN.
  return saved_errno == EAGAIN || saved_errno == EWOULDBLOCK || saved_errno == ETIMEDOUT;
}

}  // namespace hiredis_context_helpers

[[noreturn]] FAIRSEM_INLINE void throw_error(const redisContext& ctx, int saved_errno,
                                             const ErrorSite& site) {
  if (ctx.err == REDIS_ERR_OOM) {
    if (reply_depth_refused()) {
      throw ProtocolError(fmt::format(
          "fairsem: protocol error from {} in reply to {}: a reply nested more than {} arrays deep",
          site.endpoint, site.command, kMaxReplyDepth));
    }
    throw std::bad_alloc();
  }
  if (hiredis_context_helpers::is_timeout(ctx, saved_errno, site.connecting)) {
    if (site.connecting) {
      throw TimeoutError(fmt::format("fairsem: connecting to {} timed out after {} ms",
                                     site.endpoint, site.timeout.count()));
    }
    throw TimeoutError(fmt::format("fairsem: no reply to {} from {} within {} ms", site.command,
                                   site.endpoint, site.timeout.count()));
  }
  std::string detail = ctx.err == REDIS_ERR_EOF ? std::string("server closed the connection")
                                                : std::string(ctx.errstr);
  if (std::string tls = take_tls_error(ctx); !tls.empty()) detail = "TLS: " + tls;
  if (ctx.err == REDIS_ERR_PROTOCOL) {
    throw ProtocolError(fmt::format("fairsem: protocol error from {} in reply to {}: {}",
                                    site.endpoint, site.command, detail));
  }
  if (site.connecting) {
    throw ConnectionError(fmt::format("fairsem: cannot connect to {}: {}", site.endpoint, detail));
  }
  throw ConnectionError(
      fmt::format("fairsem: {} to {} failed: {}", site.command, site.endpoint, detail));
}

}  // namespace fairsem::detail
