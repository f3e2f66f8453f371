#pragma once

// Connection, connecting: the TCP or Unix socket, TLS set-up, the handshake (AUTH, SELECT, the
// Sentinel master's ROLE), and reconnect() with its backoff. The node of a routed connection
// comes from its Discovery.

#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include "fairsem/impl/config.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <utility>

#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/net/discovery.hpp"
#include "fairsem/impl/net/hiredis_context.hpp"
#include "fairsem/impl/net/hiredis_reply.hpp"
#include "fairsem/impl/net/sigpipe_guard.hpp"
#include "fairsem/impl/net/tls.hpp"
#include "fairsem/impl/scope_exit.hpp"
#include "fairsem/impl/text.hpp"

namespace fairsem::detail {

namespace connect_helpers {

/// Error replies to AUTH that mean the credentials are wrong (retrying cannot help), as
/// opposed to a transient refusal such as "ERR max number of clients reached".
FAIRSEM_INLINE bool is_credentials_error(std::string_view reply) {
  return starts_with(reply, "WRONGPASS") || starts_with(reply, "NOPERM") ||
         starts_with(reply, "ERR invalid password") || starts_with(reply, "ERR invalid username") ||
         starts_with(reply, "ERR AUTH") || starts_with(reply, "ERR Client sent AUTH");
}

FAIRSEM_INLINE std::string strip_prefix(const char* message) {
  std::string_view m(message);
  constexpr std::string_view prefix = "fairsem: ";
  if (starts_with(m, prefix)) m.remove_prefix(prefix.size());
  return std::string(m);
}

/// `text` with each occurrence of `secret` (if not empty) replaced by "***".
FAIRSEM_INLINE std::string redacted(std::string text, std::string_view secret) {
  if (secret.empty()) return text;
  for (auto at = text.find(secret); at != std::string::npos; at = text.find(secret, at + 3)) {
    text.replace(at, secret.size(), "***");
  }
  return text;
}

FAIRSEM_INLINE std::chrono::milliseconds jittered(std::chrono::milliseconds delay) {
  // Full delay at most, half at least: reconnecting clients spread out instead of arriving
  // at a restarted server in lock step.
  thread_local std::minstd_rand rng{std::random_device{}()};
  auto half = delay.count() / 2;
  std::uniform_int_distribution<long long> pick(half, delay.count());
  return std::chrono::milliseconds(pick(rng));
}

}  // namespace connect_helpers

FAIRSEM_INLINE Connection::Connection(ConnectionOptions options)
    : Connection(std::move(options), nullptr, -1) {}

FAIRSEM_INLINE Connection::Connection(ConnectionOptions options,
                                      std::shared_ptr<Discovery> discovery, int slot,
                                      std::optional<std::chrono::steady_clock::time_point> deadline)
    : options_(std::move(options)),
      discovery_(std::move(discovery)),
      slot_(slot),
      deadline_(deadline) {
  options_.validate();
  if (options_.tls.enabled) tls_ = tls_config(options_.tls);
  if (options_.routed() && !discovery_) discovery_ = std::make_shared<Discovery>(options_);
  if (!options_.routed()) discovery_.reset();
  endpoint_ = options_.endpoint();
  check_deadline("connecting");
  if (discovery_) {
    // A deployment's master can be missing for a moment (a failover): retry as a reconnect
    // does, instead of failing the first operation that needed a new connection.
    reconnect();
  } else {
    connect_once();
  }
}

FAIRSEM_INLINE Connection::Connection(Connection&&) noexcept = default;
FAIRSEM_INLINE Connection& Connection::operator=(Connection&&) noexcept = default;
FAIRSEM_INLINE Connection::~Connection() = default;

FAIRSEM_INLINE void Connection::connect_once() {
  ctx_.reset();
  // Stays broken until AUTH and SELECT have succeeded: whatever interrupts the handshake, the
  // next command starts it again instead of running unauthenticated or on db 0.
  broken_ = true;
  if (discovery_) {
    node_ = discovery_->target(slot_);
    endpoint_ = node_.endpoint();
    try {
      connect_node(node_.host, node_.port);
    } catch (const AuthError&) {
      throw;
    } catch (const ConnectionError&) {
      // A dead node, or no master: ask the deployment again next time. Not when the connect
      // only ran out of the time its deadline left (the node may be fine).
      if (!deadline_passed()) discovery_->forget();
      throw;
    }
    return;
  }
  connect_node(options_.host, options_.port);
}

FAIRSEM_INLINE void Connection::connect_node(const std::string& host, int port) {
  const auto connect_timeout = capped(options_.connect_timeout);
  const auto reply_timeout = capped(options_.command_timeout);  // of the handshake
  const timeval connect_tv = to_timeval(connect_timeout);
  errno = 0;
  redisContext* raw = options_.unix_path.empty()
                          ? redisConnectWithTimeout(host.c_str(), port, connect_tv)
                          : redisConnectUnixWithTimeout(options_.unix_path.c_str(), connect_tv);
  const int saved_errno = errno;
  if (raw == nullptr) throw std::bad_alloc();
  ContextPtr ctx(raw);
  if (raw->reader != nullptr) limit_reply_depth(*raw->reader);
  const ErrorSite site{true, "connect", endpoint_, connect_timeout};
  if (raw->err != 0) throw_error(*raw, saved_errno, site);
  if (tls_) {
    // The connect timeout also bounds each step of the TLS handshake.
    if (redisSetTimeout(raw, connect_tv) != REDIS_OK) throw_error(*raw, errno, site);
    SigpipeGuard guard;
    start_tls(*raw, *tls_, options_.tls, host, endpoint_, connect_timeout);
  }
  if (redisSetTimeout(raw, to_timeval(reply_timeout)) != REDIS_OK) {
    throw_error(*raw, errno, site);
  }
  // Keep-alive detects a peer that vanished while the connection was idle. hiredis marks the
  // context failed when it cannot be enabled, so that is a connect failure like any other.
  if (options_.unix_path.empty() && redisEnableKeepAlive(raw) != REDIS_OK) {
    throw_error(*raw, errno, site);
  }
  ctx_ = std::move(ctx);
  handshake();
  // Commands find the socket at the command timeout (roundtrip() sets any other for one).
  if (reply_timeout != options_.command_timeout) set_socket_timeout(options_.command_timeout);
  broken_ = false;
}

FAIRSEM_INLINE void Connection::handshake() {
  const bool auth = !options_.user.empty() || !options_.password.empty();
  if (auth) {
    send(options_.user.empty() ? Args{"AUTH", options_.password}
                               : Args{"AUTH", options_.user, options_.password});
    Reply reply = receive("AUTH");
    if (reply.is_error()) {
      ctx_.reset();
      std::string as = options_.user.empty() ? "" : fmt::format(" as user '{}'", options_.user);
      // A peer that is not the server it should be (another service on a reused port) may
      // quote the command it refuses, password and all.
      std::string message = fmt::format("fairsem: authentication to {}{} failed: {}", endpoint_, as,
                                        connect_helpers::redacted(reply.str, options_.password));
      if (connect_helpers::is_credentials_error(reply.str)) throw AuthError(message);
      throw ConnectionError(message);  // e.g. max clients reached: worth another attempt
    }
  }
  if (options_.db != 0) {
    const std::string db = std::to_string(options_.db);
    send({"SELECT", db});
    Reply reply = receive("SELECT");
    if (reply.is_error()) {
      ctx_.reset();
      std::string message =
          fmt::format("fairsem: SELECT {} on {} failed: {}", options_.db, endpoint_, reply.str);
      // Without a password against a server that wants one: not worth another attempt.
      if (is_unauthenticated(reply.str)) throw AuthError(message + "; set the password");
      throw ConnectionError(message);
    }
  }
  if (!options_.client_name.empty()) name_connection();
  if (discovery_ && discovery_->sentinel()) {
    check_master_role();
  } else if (tls_ && !auth && options_.db == 0 && options_.client_name.empty()) {
    probe_tls();  // (CLIENT SETNAME's reply did the same)
  }
}

FAIRSEM_INLINE void Connection::name_connection() {
  send({"CLIENT", "SETNAME", options_.client_name});
  const Reply reply = receive("CLIENT SETNAME");
  if (!reply.is_error()) return;
  ctx_.reset();
  const std::string message = fmt::format("fairsem: CLIENT SETNAME {} on {} failed: {}",
                                          options_.client_name, endpoint_, reply.str);
  if (is_unauthenticated(reply.str)) throw AuthError(message + "; set the password");
  if (starts_with(reply.str, "NOPERM")) {
    throw AuthError(message + "; the ACL user needs +client|setname, or leave client_name empty");
  }
  throw ConnectionError(message);
}

FAIRSEM_INLINE void Connection::probe_tls() {
  // A server that wants a client certificate refuses its absence only after the TLS 1.3
  // handshake, at the first read: make that read part of connecting. An error reply (NOAUTH)
  // is the next command's business, as on a plaintext connection.
  try {
    send({"PING"});
    (void)receive("PING");
  } catch (const TimeoutError&) {
    throw;
  } catch (const ConnectionError& e) {
    // The refusal races the PING: the connection can be reset before the alert is read.
    const std::string what = e.what();
    if (!options_.tls.cert.empty() || what.find("certificate") != std::string::npos) throw;
    throw ConnectionError(what +
                          " (the server closed the TLS connection after the handshake: if it "
                          "requires a client certificate, set cert and key)");
  }
}

FAIRSEM_INLINE void Connection::check_master_role() {
  // A sentinel can name a master that has just been demoted, or not yet promoted.
  send({"ROLE"});
  const Reply role = receive("ROLE");
  const std::string what =
      role.type == Reply::Type::array && !role.elements.empty() ? role.elements[0].str : "";
  if (what != "master") {
    ctx_.reset();
    throw ConnectionError(
        fmt::format("fairsem: {} is {}, not the master of '{}' (a failover may be under way)",
                    endpoint_, what.empty() ? std::string("not answering ROLE") : "a " + what,
                    printable(options_.sentinel_master)));
  }
}

FAIRSEM_INLINE void Connection::ensure_connected() {
  if (broken()) reconnect();
}

FAIRSEM_INLINE void Connection::use_slot(int slot) {
  if (!discovery_ || slot == slot_) return;
  slot_ = slot;
  if (broken()) return;  // the next command connects to the slot's master anyway
  // Not known now (the map being asked for): a MOVED reply will say where.
  const std::optional<NodeAddress> node = discovery_->known_target(slot);
  if (node && !(*node == node_)) broken_ = true;
}

FAIRSEM_INLINE void Connection::reconnect() {
  ctx_.reset();
  broken_ = true;
  auto delay = options_.reconnect_backoff_min;
  for (int attempt = 1;; ++attempt) {
    const auto pause = connect_helpers::jittered(delay);
    // The last attempt: the attempts are used up, or the next could not start before the
    // deadline (its error is then the one to report, not the deadline's).
    const auto last = [&] {
      return attempt >= options_.reconnect_attempts || deadline_passed() ||
             (deadline_ && std::chrono::steady_clock::now() + pause >= *deadline_);
    };
    try {
      check_deadline("connecting");
      connect_once();
      if (reconnects_) reconnects_->fetch_add(1, std::memory_order_relaxed);
      return;
    } catch (const AuthError&) {
      throw;  // wrong credentials do not fix themselves
    } catch (const TimeoutError& e) {
      if (last()) {
        throw TimeoutError(fmt::format("fairsem: reconnecting gave up after {} attempts: {}",
                                       attempt, connect_helpers::strip_prefix(e.what())));
      }
    } catch (const ConnectionError& e) {
      if (last()) {
        throw ConnectionError(fmt::format("fairsem: reconnecting gave up after {} attempts: {}",
                                          attempt, connect_helpers::strip_prefix(e.what())));
      }
    }
    std::this_thread::sleep_for(capped(pause));
    delay = std::min(delay * 2, options_.reconnect_backoff_max);
  }
}

FAIRSEM_INLINE void Connection::connect_by(
    std::optional<std::chrono::steady_clock::time_point> deadline) {
  if (!broken()) {
    // A server that went away closed the idle socket: a command written now would be lost
    // with no reply, as if it might have run. Peeked at, nothing read.
    char byte = 0;
    const ssize_t n = ::recv(ctx_->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    const bool closed =
        n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    if (!closed) return;
    broken_ = true;
  }
  const std::optional<std::chrono::steady_clock::time_point> kept = deadline_;
  if (deadline && (!kept || *deadline < *kept)) deadline_ = deadline;
  const ScopeExit restore([this, kept] { deadline_ = kept; });
  reconnect();
}

}  // namespace fairsem::detail
