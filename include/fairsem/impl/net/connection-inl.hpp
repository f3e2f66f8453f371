#pragma once

// Connection, the socket in use: one command written and its reply read (with the SIGPIPE
// guard and a longer timeout for blocking commands), command_in_place(), the halves of one
// (send_in_place(), read_available()) for a thread that polls, and pipeline().
// Connecting is in connection_connect-inl.hpp; command() and eval(), which follow redirections
// and reload scripts, are in connection_redirect-inl.hpp.

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/net/connection.hpp"

#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "fairsem/errors.hpp"
#include "fairsem/impl/net/hiredis_context.hpp"
#include "fairsem/impl/net/hiredis_reply.hpp"
#include "fairsem/impl/net/sigpipe_guard.hpp"
#include "fairsem/impl/text.hpp"

namespace fairsem::detail {

FAIRSEM_INLINE bool is_unauthenticated(std::string_view error) noexcept {
  return starts_with(error, "NOAUTH") || starts_with(error, "ERR Protocol error: unauthenticated");
}

FAIRSEM_INLINE int Connection::socket_fd() const noexcept { return ctx_ ? ctx_->fd : -1; }

FAIRSEM_INLINE void Connection::send(const Args& argv) {
  std::vector<const char*> ptrs;
  std::vector<std::size_t> lens;
  ptrs.reserve(argv.size());
  lens.reserve(argv.size());
  for (std::string_view a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  if (redisAppendCommandArgv(ctx_.get(), static_cast<int>(argv.size()), ptrs.data(), lens.data()) !=
      REDIS_OK) {
    const int saved_errno = errno;
    broken_ = true;
    throw_error(*ctx_, saved_errno, {false, argv[0], endpoint_, options_.command_timeout});
  }
}

FAIRSEM_INLINE Reply Connection::receive(std::string_view command_name) {
  return receive(command_name, options_.command_timeout);
}

FAIRSEM_INLINE void Connection::set_socket_timeout(std::chrono::milliseconds timeout) {
  if (redisSetTimeout(ctx_.get(), to_timeval(timeout)) != REDIS_OK) {
    const int saved_errno = errno;
    broken_ = true;
    throw_error(*ctx_, saved_errno, {false, "setting the socket timeout", endpoint_, timeout});
  }
}

FAIRSEM_INLINE void Connection::await_reply(std::string_view command_name,
                                            std::chrono::milliseconds timeout) {
  if (stall_report_ == nullptr || !ctx_) return;
  // What redisGetReply would write first: nothing can answer before it is sent.
  flush(command_name, timeout);
  // Read already (with an earlier reply): nothing to wait for.
  if (ctx_->reader != nullptr && ctx_->reader->pos < ctx_->reader->len) return;
  using std::chrono::steady_clock;
  const auto end = steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(end - steady_clock::now());
    if (left.count() <= 0) {
      broken_ = true;
      throw TimeoutError(fmt::format("fairsem: no reply to {} from {} within {} ms", command_name,
                                     endpoint_, timeout.count()));
    }
    const auto wait = std::min(left, stall_every_);
    pollfd ready{ctx_->fd, POLLIN, 0};
    const int r = ::poll(&ready, 1, static_cast<int>(wait.count()));
    if (r < 0 && errno == EINTR) continue;
    // Readable, closed or failed (or poll itself failed): redisGetReply reads what it is.
    if (r != 0) return;
    // A whole `every` without a reply, and the wait goes on (at its end, the timeout reports).
    if (wait == stall_every_ && wait < left) (*stall_report_)();
  }
}

FAIRSEM_INLINE Reply Connection::receive(std::string_view command_name,
                                         std::chrono::milliseconds timeout) {
  await_reply(command_name, timeout);
  void* raw = nullptr;
  int rc = REDIS_OK;
  int saved_errno = 0;
  {
    SigpipeGuard guard;  // redisGetReply first flushes the pending commands
    errno = 0;
    rc = redisGetReply(ctx_.get(), &raw);
    saved_errno = errno;
  }
  if (rc != REDIS_OK) {
    broken_ = true;
    throw_error(*ctx_, saved_errno, {false, command_name, endpoint_, timeout});
  }
  ReplyPtr reply(static_cast<redisReply*>(raw));
  if (!reply) {
    broken_ = true;
    throw ProtocolError(
        fmt::format("fairsem: no reply object for {} from {}", command_name, endpoint_));
  }
  return convert(*reply);
}

FAIRSEM_INLINE bool Connection::deadline_passed() const noexcept {
  return (interrupt_ != nullptr && interrupt_->load(std::memory_order_acquire)) ||
         (deadline_ && std::chrono::steady_clock::now() >= *deadline_);
}

FAIRSEM_INLINE std::chrono::milliseconds Connection::capped(
    std::chrono::milliseconds timeout) const noexcept {
  if (interrupt_ != nullptr && interrupt_->load(std::memory_order_acquire)) {
    return std::chrono::milliseconds(1);
  }
  if (!deadline_) return timeout;
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(*deadline_ - std::chrono::steady_clock::now());
  return std::max(std::chrono::milliseconds(1), std::min(timeout, left));
}

FAIRSEM_INLINE void Connection::check_deadline(std::string_view what) const {
  if (!deadline_passed()) return;
  if (interrupt_ != nullptr && interrupt_->load(std::memory_order_acquire)) {
    throw TimeoutError(fmt::format(
        "fairsem: {} to {} not attempted: the request it was for was cancelled", what, endpoint_));
  }
  throw TimeoutError(fmt::format(
      "fairsem: {} to {} not attempted: its deadline (the end of the leases it would extend) has "
      "passed",
      what, endpoint_));
}

FAIRSEM_INLINE Reply Connection::roundtrip(const Args& argv, std::chrono::milliseconds timeout) {
  check_deadline(argv[0]);
  ensure_connected();
  check_deadline(argv[0]);
  timeout = capped(timeout);
  const bool longer = timeout != options_.command_timeout;
  if (longer) set_socket_timeout(timeout);
  Reply reply;
  try {
    send(argv);
    reply = receive(argv[0], timeout);
  } catch (...) {
    broken_ = true;  // never hand out a connection still set to the long timeout
    throw;
  }
  if (longer) set_socket_timeout(options_.command_timeout);
  if (reply.is_error() && is_unauthenticated(reply.str)) {
    // After "Protocol error" the server closes the connection; after NOAUTH nothing on it can
    // run either. Retrying cannot help: the credentials are the caller's to fix.
    broken_ = true;
    const bool has_password = !options_.password.empty();
    throw AuthError(fmt::format(
        "fairsem: {} on {} was refused: the server requires authentication{} ({}); set the "
        "password (and the user for an ACL user) in ConnectionOptions or the URL",
        argv[0], endpoint_, has_password ? " and did not take the credentials given" : "",
        reply.str));
  }
  return reply;
}

FAIRSEM_INLINE Reply Connection::command_in_place(const Args& argv,
                                                  std::chrono::milliseconds reply_timeout) {
  if (argv.empty()) throw InvalidArgument("fairsem: a command needs at least its name");
  if (broken()) {
    throw ConnectionError(fmt::format(
        "fairsem: {} to {} not sent: the connection it is about was lost", argv[0], endpoint_));
  }
  // It waits on purpose (WAIT, for replicas, up to its own timeout): no stall to report.
  const std::function<void()>* const report = std::exchange(stall_report_, nullptr);
  try {
    Reply reply = roundtrip(argv, reply_timeout);
    stall_report_ = report;
    return reply;
  } catch (...) {
    stall_report_ = report;
    throw;
  }
}

FAIRSEM_INLINE void Connection::send_in_place(const Args& argv) {
  if (argv.empty()) throw InvalidArgument("fairsem: a command needs at least its name");
  if (broken()) {
    throw ConnectionError(
        fmt::format("fairsem: {} to {} not sent: the connection was lost", argv[0], endpoint_));
  }
  send(argv);
  flush(argv[0], options_.command_timeout);
}

FAIRSEM_INLINE void Connection::flush(std::string_view command_name,
                                      std::chrono::milliseconds timeout) {
  SigpipeGuard guard;
  int done = 0;
  while (done == 0) {
    errno = 0;
    if (redisBufferWrite(ctx_.get(), &done) != REDIS_OK) {
      const int saved_errno = errno;
      broken_ = true;
      throw_error(*ctx_, saved_errno, {false, command_name, endpoint_, timeout});
    }
  }
}

FAIRSEM_INLINE std::optional<Reply> Connection::read_available(std::string_view command_name) {
  if (broken()) {
    throw ConnectionError(
        fmt::format("fairsem: the reply to {} from {} was lost with its "
                    "connection",
                    command_name, endpoint_));
  }
  void* raw = nullptr;
  int rc = REDIS_OK;
  int saved_errno = 0;
  {
    // A read can write: over TLS, OpenSSL answers a connection cut mid-record with a fatal
    // alert, which raises SIGPIPE on a socket the peer has closed (a stress worker died so).
    SigpipeGuard guard;
    errno = 0;
    rc = redisBufferRead(ctx_.get());
    if (rc == REDIS_OK) rc = redisGetReplyFromReader(ctx_.get(), &raw);
    saved_errno = errno;
  }
  if (rc != REDIS_OK) {
    broken_ = true;
    throw_error(*ctx_, saved_errno, {false, command_name, endpoint_, options_.command_timeout});
  }
  if (raw == nullptr) return std::nullopt;
  ReplyPtr reply(static_cast<redisReply*>(raw));
  return convert(*reply);
}

FAIRSEM_INLINE std::vector<Reply> Connection::pipeline(const std::vector<Args>& commands) {
  for (const Args& argv : commands) {
    if (argv.empty()) throw InvalidArgument("fairsem: a command needs at least its name");
  }
  ensure_connected();
  std::vector<Reply> replies;
  replies.reserve(commands.size());
  try {
    for (const Args& argv : commands) send(argv);
    for (const Args& argv : commands) replies.push_back(receive(argv[0]));
  } catch (...) {
    broken_ = true;  // replies may be left unread: the stream is out of step
    throw;
  }
  return replies;
}

}  // namespace fairsem::detail
