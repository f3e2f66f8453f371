#pragma once

// A single blocking connection to Redis over hiredis. Internal: the public API never exposes
// it, and this header does not include hiredis.h (the context is only forward-declared).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fairsem/connection_options.hpp"
#include "fairsem/impl/protocol/reply.hpp"
#include "fairsem/impl/protocol/scripts.hpp"

struct redisContext;

namespace fairsem::detail {

class Discovery;
class TlsConfig;

struct ContextDeleter {
  void operator()(redisContext* ctx) const noexcept;
};
using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;

/// A view of one command's arguments; each argument is sent as a binary-safe bulk string.
using Args = std::vector<std::string_view>;

/// True for an error reply that says the connection is not authenticated: NOAUTH, or the
/// protocol error a server sends instead, before it would say NOAUTH, to an unauthenticated
/// command of more than 10 arguments (or a large one). Every command meeting one throws
/// AuthError.
bool is_unauthenticated(std::string_view error) noexcept;

/// Whether an error reply to a script call (FCALL or EVALSHA) says the script did not run, for
/// a reason Connection::eval() deals with by running it again: code the server lacks
/// (NOSCRIPT, a function not found), FCALL unknown or refused, a redirection (MOVED, ASK) or a
/// master turned replica.
bool script_did_not_run(std::string_view error);

/// Move-only. Not thread-safe: one user at a time (the semaphore keeps a pool).
///
/// Error model: a server error reply to `command()` throws ReplyError, except that a refusal
/// for want of authentication (is_unauthenticated) throws AuthError from every command; a
/// broken socket or a timeout throws ConnectionError/TimeoutError and marks the connection
/// broken. A broken
/// connection reconnects (bounded exponential backoff, AUTH and SELECT re-applied) at the start
/// of the next command; the failed command itself is never re-sent, since it may have run.
///
/// Routed options (Cluster, Sentinel): the connection talks to the node its Discovery names for
/// its slot. Replies that say a command did not run there are followed, up to a few hops:
/// MOVED (the slot's new master: remembered, reconnected to, sent again), ASK (sent once to the
/// importing node after ASKING), and, from a master turned replica, READONLY or UNBLOCKED (the
/// master is asked for again). pipeline() follows none of them.
///
/// Implemented in three files, one per facet: connection_connect-inl.hpp (connecting, TLS, the
/// handshake, reconnect()), connection-inl.hpp (the socket: send, receive, pipeline()) and
/// connection_redirect-inl.hpp (command() and eval(): redirections followed, scripts reloaded
/// after NOSCRIPT).
class Connection {
 public:
  /// Validates the options and connects once; throws InvalidArgument, ConnectionError,
  /// TimeoutError or AuthError. Routed options get a Discovery of their own.
  explicit Connection(ConnectionOptions options);
  /// A connection for commands on cluster hash slot `slot` (-1: keyless commands), routed by
  /// `discovery` (shared with other connections; null for standalone options). Routed, the first
  /// connect is retried like a reconnect (reconnect_attempts, with backoff). With `deadline`,
  /// connecting stops there as set_deadline() says, and the connection keeps that deadline.
  Connection(ConnectionOptions options, std::shared_ptr<Discovery> discovery, int slot,
             std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);
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

  /// Sends one command on the socket as it is: no reconnect (throws ConnectionError when the
  /// connection is broken) and no redirection. Error replies are returned, not thrown. For
  /// WAIT, which only counts this socket's own writes (and waits on purpose: a stall report set
  /// is not called meanwhile).
  Reply command_in_place(const Args& argv, std::chrono::milliseconds reply_timeout);

  /// Writes one command on the socket as it is (no reconnect, no redirection) and returns
  /// without its reply, which read_available() reads: for a thread that waits on several
  /// connections with poll(2). Throws ConnectionError when the connection is broken.
  void send_in_place(const Args& argv);
  /// After send_in_place(), once poll(2) says the socket is readable: reads what it has. The
  /// reply once it is whole (an error reply returned, not thrown), nullopt while more is to
  /// come. Throws ConnectionError (the connection broken) when the socket failed or closed.
  std::optional<Reply> read_available(std::string_view command_name);

  /// Sends every command in one write and reads the replies in order. Error replies are
  /// returned as Reply::Type::error elements, not thrown, so every reply is seen.
  std::vector<Reply> pipeline(const std::vector<Args>& commands);

  /// Runs `script`: with FCALL when it has a function library (Redis 7+), else with EVALSHA.
  /// Code the server lacks (after a flush, a restart, on a new master) is loaded, FUNCTION LOAD
  /// or SCRIPT LOAD, and the call sent once more. When FCALL is unknown or refused (Redis 6,
  /// an ACL without FCALL or FUNCTION LOAD), or the library cannot be loaded (not compiled, or
  /// a foreign library under its name), the script runs with EVALSHA instead, and so does every
  /// later script on this connection; when FUNCTION LOAD is refused for lack of memory (OOM),
  /// this call only.
  Reply eval(const Script& script, const Args& keys, const Args& args);
  /// The command eval() sends first to run `script` here: FCALL of its function while this
  /// connection runs functions, else EVALSHA. `numkeys` (keys.size() as text) must outlive it.
  Args script_command(const Script& script, const Args& keys, const Args& args,
                      const std::string& numkeys) const;
  /// False once this connection has fallen back from functions to EVALSHA (see eval()).
  bool runs_functions() const noexcept { return functions_; }

  /// True once an I/O error or timeout has made the socket unusable.
  bool broken() const noexcept { return !ctx_ || broken_; }
  /// The socket's descriptor (-1 without one), to wait on with poll(2) after send_in_place();
  /// nothing else may be done with it.
  int socket_fd() const noexcept;

  /// Drops the socket and connects again: up to options().reconnect_attempts attempts with
  /// exponential backoff between them. AuthError and InvalidArgument are not retried. With a
  /// deadline (or the interrupt raised), it gives up with the last attempt's error once no
  /// further attempt could start before the deadline.
  void reconnect();
  /// Connects now, as the next command would, if the connection is broken or the server has
  /// closed it meanwhile (an idle connection to a server that went away), connecting no later
  /// than `deadline` (none: as configured). Sends nothing: a failure here reached no server.
  void connect_by(std::optional<std::chrono::steady_clock::time_point> deadline);

  /// From now on, until cleared (nullopt), nothing this connection does lasts past `deadline`:
  /// each connect and reply timeout is capped by the time left, no reconnect attempt starts
  /// and no pause between attempts lasts beyond it, and once it has passed a command throws
  /// TimeoutError without being sent (the connection stays as it was). For the renewal lanes,
  /// whose calls are worth nothing once the leases they extend have run out.
  void set_deadline(std::optional<std::chrono::steady_clock::time_point> deadline) noexcept {
    deadline_ = deadline;
  }
  /// From now on, until cleared (nullptr), this connection behaves as if its deadline had
  /// passed once `*flag` is true (set by another thread): the wait under way (for a reply, a
  /// connect or a TLS handshake) runs out, but no other attempt, reconnect or pause starts. For
  /// an asynchronous request's calls: a cancel ends the call under way without its retries.
  /// `flag` must outlive the setting.
  void set_interrupt(const std::atomic<bool>* flag) noexcept { interrupt_ = flag; }
  /// The interrupt set (nullptr: none).
  const std::atomic<bool>* interrupt() const noexcept { return interrupt_; }
  /// From now on, until cleared (nullptr), while this connection waits for a reply, `*report`
  /// is called each time `every` passes without one; the wait goes on to its timeout as before.
  /// For the renewal lanes: a renewal that a hung server never answers is reported (as a failed
  /// renewal) long before the leases it would extend run out. `report` must outlive the setting.
  void set_stall_report(std::chrono::milliseconds every,
                        const std::function<void()>* report) noexcept {
    stall_every_ = std::max(std::chrono::milliseconds(1), every);
    stall_report_ = report;
  }
  /// True while a deadline is set.
  bool has_deadline() const noexcept { return deadline_.has_value(); }
  /// True once the deadline set has passed, or the interrupt set is raised (false without).
  bool deadline_passed() const noexcept;
  /// `timeout`, capped by the time left before the deadline (at least 1 ms); as it is without
  /// one.
  std::chrono::milliseconds capped(std::chrono::milliseconds timeout) const noexcept;

  /// From now on, each reconnect() that succeeds (whether called directly, or at the start of a
  /// command after the connection broke or a redirection moved it) adds 1 to `counter`, which
  /// several connections may share (a semaphore's Metrics::reconnects). Set after construction,
  /// so the first connect is never counted. Null: not counted.
  void count_reconnects(std::shared_ptr<std::atomic<std::uint64_t>> counter) noexcept {
    reconnects_ = std::move(counter);
  }

  const ConnectionOptions& options() const noexcept { return options_; }
  /// The cluster hash slot it was made for, or was last given (-1: any).
  int slot() const noexcept { return slot_; }
  /// From now on its commands are for cluster hash slot `slot`, which it routes by (its
  /// reconnects, the redirections it follows). Connected to another node than the slot map
  /// now names for `slot`, it connects there at the next command. For a renewal lane, whose
  /// one connection serves every slot of its node. Nothing to do outside a Cluster.
  void use_slot(int slot);
  /// "host:port" or "unix:/path" of the node connected to, as quoted in error messages.
  const std::string& endpoint() const noexcept { return endpoint_; }

 private:
  /// Sends one command and reads its reply, following redirections and reloading `script`
  /// after NOSCRIPT. Error replies that are not followed are returned, not thrown.
  Reply exchange(const Args& argv, std::chrono::milliseconds timeout, const Script* script);
  /// One command on this socket as it is (no redirection), with `timeout` for the reply.
  Reply roundtrip(const Args& argv, std::chrono::milliseconds timeout);
  /// SCRIPT LOAD, checking the SHA1 the server computed.
  void load(const Script& script);
  /// FUNCTION LOAD of `library`: true when it is on the server now (loaded, or a library of
  /// its name is there already); otherwise false, with the error reply in `error`.
  bool load_library(const Library& library, Reply& error);
  enum class Reload { not_needed, loaded, failed };
  /// After `reply` to `argv` (a script's EVALSHA or FCALL), loads the code this server lacks.
  /// loaded: send the command again; failed: `reply` is now FUNCTION LOAD's error reply.
  Reload reload(const Args& argv, Reply& reply, const Script* script);
  /// An ASK redirection: ASKING and the command once on `node` (NOSCRIPT reloaded there).
  Reply ask(const NodeAddress& node, const Args& argv, std::chrono::milliseconds timeout,
            const Script* script);
  void connect_once();
  /// Connects to host:port (or the Unix socket), then handshake().
  void connect_node(const std::string& host, int port);
  /// AUTH, SELECT, name_connection() and, for Sentinel, check_master_role() on a new socket.
  void handshake();
  /// CLIENT SETNAME client_name (when set). Throws AuthError when the server refuses it for
  /// want of a password or an ACL permission, ConnectionError for anything else.
  void name_connection();
  /// Over TLS, when the handshake sent nothing: one PING, so that a server refusing a missing
  /// client certificate fails the connect rather than the first command.
  void probe_tls();
  /// Throws ConnectionError unless ROLE says this node is a master.
  void check_master_role();
  void ensure_connected();
  void send(const Args& argv);
  /// Writes everything hiredis holds for the socket (ConnectionError, marking the connection
  /// broken, when it cannot), `timeout` being the one the error names.
  void flush(std::string_view command_name, std::chrono::milliseconds timeout);
  Reply receive(std::string_view command_name);
  Reply receive(std::string_view command_name, std::chrono::milliseconds timeout);
  /// With a stall report set: writes what is pending and waits up to `timeout` for the socket to
  /// be readable, calling the report at each `stall_every_` of the wait (TimeoutError when it
  /// never is). Without one, nothing: redisGetReply waits.
  void await_reply(std::string_view command_name, std::chrono::milliseconds timeout);
  void set_socket_timeout(std::chrono::milliseconds timeout);
  [[noreturn]] void fail_io(std::string_view action, int saved_errno);
  /// Throws TimeoutError, saying `what` was not attempted, once the deadline has passed.
  void check_deadline(std::string_view what) const;

  ConnectionOptions options_;
  std::shared_ptr<Discovery> discovery_;  // null: standalone
  int slot_ = -1;
  NodeAddress node_;  // routed: the node connected to (or last tried)
  std::string endpoint_;
  ContextPtr ctx_;
  bool broken_ = false;
  bool functions_ = true;                 // FCALL for scripts that have a function (see eval())
  bool load_failed_ = false;              // the last exchange()'s error reply is FUNCTION LOAD's
  std::shared_ptr<const TlsConfig> tls_;  // null: plaintext
  std::shared_ptr<std::atomic<std::uint64_t>> reconnects_;         // null: not counted
  std::optional<std::chrono::steady_clock::time_point> deadline_;  // set_deadline()
  const std::atomic<bool>* interrupt_ = nullptr;                   // set_interrupt()
  const std::function<void()>* stall_report_ = nullptr;            // set_stall_report()
  std::chrono::milliseconds stall_every_{0};
};

}  // namespace fairsem::detail
