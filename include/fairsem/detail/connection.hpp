#pragma once

// A single blocking connection to Redis over hiredis. Internal: the public API never exposes
// it, and this header does not include hiredis.h (the context is only forward-declared).

#include <chrono>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fairsem/connection_options.hpp"
#include "fairsem/detail/reply.hpp"
#include "fairsem/detail/scripts.hpp"

struct redisContext;

namespace fairsem::detail {

struct ContextDeleter {
  void operator()(redisContext* ctx) const noexcept;
};
using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;

/// A view of one command's arguments; each argument is sent as a binary-safe bulk string.
using Args = std::vector<std::string_view>;

/// Move-only. Not thread-safe: one user at a time (the semaphore keeps a pool).
///
/// Error model: a server error reply to `command()` throws ReplyError; a broken socket or a
/// timeout throws ConnectionError/TimeoutError and marks the connection broken. A broken
/// connection reconnects (bounded exponential backoff, AUTH and SELECT re-applied) at the start
/// of the next command; the failed command itself is never re-sent, since it may have run.
class Connection {
 public:
  /// Validates the options and connects once; throws InvalidArgument, ConnectionError,
  /// TimeoutError or AuthError.
  explicit Connection(ConnectionOptions options);
  Connection(Connection&&) noexcept;
  Connection& operator=(Connection&&) noexcept;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  /// Sends one command and waits for its reply. Throws ReplyError for an error reply.
  Reply command(const Args& argv);
  Reply command(std::initializer_list<std::string_view> argv) { return command(Args(argv)); }
  /// As command(), waiting up to `reply_timeout` for the reply instead of the configured
  /// command timeout (for blocking commands such as BRPOP).
  Reply command(const Args& argv, std::chrono::milliseconds reply_timeout);

  /// Sends every command in one write and reads the replies in order. Error replies are
  /// returned as Reply::Type::error elements, not thrown, so every reply is seen.
  std::vector<Reply> pipeline(const std::vector<Args>& commands);

  /// Runs `script` with EVALSHA. If the server has lost it (NOSCRIPT, e.g. after SCRIPT FLUSH
  /// or a restart), loads it with SCRIPT LOAD and retries once.
  Reply eval(const Script& script, const Args& keys, const Args& args);

  /// True once an I/O error or timeout has made the socket unusable.
  bool broken() const noexcept { return !ctx_ || broken_; }

  /// Drops the socket and connects again: up to options().reconnect_attempts attempts with
  /// exponential backoff between them. AuthError and InvalidArgument are not retried.
  void reconnect();

  const ConnectionOptions& options() const noexcept { return options_; }
  /// "host:port" or "unix:/path", as quoted in error messages.
  const std::string& endpoint() const noexcept { return endpoint_; }

 private:
  void connect_once();
  void ensure_connected();
  void send(const Args& argv);
  Reply receive(std::string_view command_name);
  Reply receive(std::string_view command_name, std::chrono::milliseconds timeout);
  void set_socket_timeout(std::chrono::milliseconds timeout);
  [[noreturn]] void fail_io(std::string_view action, int saved_errno);

  ConnectionOptions options_;
  std::string endpoint_;
  ContextPtr ctx_;
  bool broken_ = false;
};

}  // namespace fairsem::detail
