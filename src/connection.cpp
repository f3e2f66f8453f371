#include "fairsem/detail/connection.hpp"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>  // NOLINT(modernize-deprecated-headers): POSIX sigset_t, sigtimedwait
#include <sys/time.h>

#include <cerrno>
#include <new>
#include <random>
#include <thread>
#include <utility>

#include "fairsem/detail/discovery.hpp"
#include "fairsem/detail/replies.hpp"
#include "fairsem/detail/router.hpp"
#include "fairsem/detail/text.hpp"
#include "hiredis_reply.hpp"
#include "tls.hpp"

namespace fairsem::detail {

void ContextDeleter::operator()(redisContext* ctx) const noexcept { redisFree(ctx); }

namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(ms.count() / 1000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>((ms.count() % 1000) * 1000);
  return tv;
}

/// Where a hiredis error happened, for the message.
struct ErrorSite {
  bool connecting;                    // true: while connecting; false: waiting for a reply
  std::string_view command;           // command name (never its arguments)
  const std::string& endpoint;        // "host:port"
  std::chrono::milliseconds timeout;  // the limit that applied
};

bool is_timeout(const redisContext& ctx, int saved_errno, bool connecting) {
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

/// Error replies to AUTH that mean the credentials are wrong (retrying cannot help), as
/// opposed to a transient refusal such as "ERR max number of clients reached".
bool is_credentials_error(std::string_view reply) {
  return starts_with(reply, "WRONGPASS") || starts_with(reply, "NOPERM") ||
         starts_with(reply, "ERR invalid password") || starts_with(reply, "ERR invalid username") ||
         starts_with(reply, "ERR AUTH") || starts_with(reply, "ERR Client sent AUTH");
}

/// The one place that turns a failed hiredis context into a fairsem exception.
[[noreturn]] void throw_error(const redisContext& ctx, int saved_errno, const ErrorSite& site) {
  if (ctx.err == REDIS_ERR_OOM) {
    if (reply_depth_refused()) {
      throw ProtocolError(fmt::format(
          "fairsem: protocol error from {} in reply to {}: a reply nested more than {} arrays deep",
          site.endpoint, site.command, kMaxReplyDepth));
    }
    throw std::bad_alloc();
  }
  if (is_timeout(ctx, saved_errno, site.connecting)) {
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

/// hiredis writes with write(2); writing to a socket the server has reset raises SIGPIPE, whose
/// default action kills the whole process. For the duration of one flush, SIGPIPE is blocked on
/// this thread and a SIGPIPE raised meanwhile is consumed, so the failed write surfaces as EPIPE
/// (a ConnectionError) and the application's own SIGPIPE handling is left alone.
class SigpipeGuard {
 public:
  SigpipeGuard() noexcept {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_mask_);
  }
  ~SigpipeGuard() {
    if (!was_pending_) {
      sigset_t pending;
      sigemptyset(&pending);
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{};
        while (sigtimedwait(&pipe_, nullptr, &zero) < 0 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_mask_{};
  bool was_pending_ = false;
};

std::string strip_prefix(const char* message) {
  std::string_view m(message);
  constexpr std::string_view prefix = "fairsem: ";
  if (starts_with(m, prefix)) m.remove_prefix(prefix.size());
  return std::string(m);
}

/// `text` with each occurrence of `secret` (if not empty) replaced by "***".
std::string redacted(std::string text, std::string_view secret) {
  if (secret.empty()) return text;
  for (auto at = text.find(secret); at != std::string::npos; at = text.find(secret, at + 3)) {
    text.replace(at, secret.size(), "***");
  }
  return text;
}

std::chrono::milliseconds jittered(std::chrono::milliseconds delay) {
  // Full delay at most, half at least: reconnecting clients spread out instead of arriving
  // at a restarted server in lock step.
  thread_local std::minstd_rand rng{std::random_device{}()};
  auto half = delay.count() / 2;
  std::uniform_int_distribution<long long> pick(half, delay.count());
  return std::chrono::milliseconds(pick(rng));
}

}  // namespace

Connection::Connection(ConnectionOptions options) : Connection(std::move(options), nullptr, -1) {}

Connection::Connection(ConnectionOptions options, std::shared_ptr<Discovery> discovery, int slot)
    : options_(std::move(options)), discovery_(std::move(discovery)), slot_(slot) {
  options_.validate();
  if (options_.tls.enabled) tls_ = tls_config(options_.tls);
  if (options_.routed() && !discovery_) discovery_ = std::make_shared<Discovery>(options_);
  if (!options_.routed()) discovery_.reset();
  endpoint_ = options_.endpoint();
  if (discovery_) {
    // A deployment's master can be missing for a moment (a failover): retry as a reconnect
    // does, instead of failing the first operation that needed a new connection.
    reconnect();
  } else {
    connect_once();
  }
}

Connection::Connection(Connection&&) noexcept = default;
Connection& Connection::operator=(Connection&&) noexcept = default;
Connection::~Connection() = default;

void Connection::connect_once() {
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
      discovery_->forget();  // a dead node, or no master: ask the deployment again next time
      throw;
    }
    return;
  }
  connect_node(options_.host, options_.port);
}

int Connection::socket_fd() const noexcept { return ctx_ ? ctx_->fd : -1; }

void Connection::connect_node(const std::string& host, int port) {
  const timeval connect_tv = to_timeval(options_.connect_timeout);
  errno = 0;
  redisContext* raw = options_.unix_path.empty()
                          ? redisConnectWithTimeout(host.c_str(), port, connect_tv)
                          : redisConnectUnixWithTimeout(options_.unix_path.c_str(), connect_tv);
  const int saved_errno = errno;
  if (raw == nullptr) throw std::bad_alloc();
  ContextPtr ctx(raw);
  if (raw->reader != nullptr) limit_reply_depth(*raw->reader);
  const ErrorSite site{true, "connect", endpoint_, options_.connect_timeout};
  if (raw->err != 0) throw_error(*raw, saved_errno, site);
  if (tls_) {
    // The connect timeout also bounds each step of the TLS handshake.
    if (redisSetTimeout(raw, connect_tv) != REDIS_OK) throw_error(*raw, errno, site);
    SigpipeGuard guard;
    start_tls(*raw, *tls_, options_.tls, host, endpoint_, options_.connect_timeout);
  }
  if (redisSetTimeout(raw, to_timeval(options_.command_timeout)) != REDIS_OK) {
    throw_error(*raw, errno, site);
  }
  // Keep-alive detects a peer that vanished while the connection was idle. hiredis marks the
  // context failed when it cannot be enabled, so that is a connect failure like any other.
  if (options_.unix_path.empty() && redisEnableKeepAlive(raw) != REDIS_OK) {
    throw_error(*raw, errno, site);
  }
  ctx_ = std::move(ctx);
  handshake();
  broken_ = false;
}

void Connection::handshake() {
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
                                        redacted(reply.str, options_.password));
      if (is_credentials_error(reply.str)) throw AuthError(message);
      throw ConnectionError(message);  // e.g. max clients reached: worth another attempt
    }
  }
  if (options_.db != 0) {
    const std::string db = std::to_string(options_.db);
    send({"SELECT", db});
    Reply reply = receive("SELECT");
    if (reply.is_error()) {
      ctx_.reset();
      throw ConnectionError(
          fmt::format("fairsem: SELECT {} on {} failed: {}", options_.db, endpoint_, reply.str));
    }
  }
  if (discovery_ && discovery_->sentinel()) {
    check_master_role();
  } else if (tls_ && !auth && options_.db == 0) {
    probe_tls();
  }
}

void Connection::probe_tls() {
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

void Connection::check_master_role() {
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

void Connection::ensure_connected() {
  if (broken()) reconnect();
}

void Connection::reconnect() {
  ctx_.reset();
  broken_ = true;
  auto delay = options_.reconnect_backoff_min;
  for (int attempt = 1;; ++attempt) {
    try {
      connect_once();
      if (reconnects_) reconnects_->fetch_add(1, std::memory_order_relaxed);
      return;
    } catch (const AuthError&) {
      throw;  // wrong credentials do not fix themselves
    } catch (const TimeoutError& e) {
      if (attempt >= options_.reconnect_attempts) {
        throw TimeoutError(fmt::format("fairsem: reconnecting gave up after {} attempts: {}",
                                       attempt, strip_prefix(e.what())));
      }
    } catch (const ConnectionError& e) {
      if (attempt >= options_.reconnect_attempts) {
        throw ConnectionError(fmt::format("fairsem: reconnecting gave up after {} attempts: {}",
                                          attempt, strip_prefix(e.what())));
      }
    }
    std::this_thread::sleep_for(jittered(delay));
    delay = std::min(delay * 2, options_.reconnect_backoff_max);
  }
}

void Connection::send(const Args& argv) {
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

Reply Connection::receive(std::string_view command_name) {
  return receive(command_name, options_.command_timeout);
}

void Connection::set_socket_timeout(std::chrono::milliseconds timeout) {
  if (redisSetTimeout(ctx_.get(), to_timeval(timeout)) != REDIS_OK) {
    const int saved_errno = errno;
    broken_ = true;
    throw_error(*ctx_, saved_errno, {false, "setting the socket timeout", endpoint_, timeout});
  }
}

Reply Connection::receive(std::string_view command_name, std::chrono::milliseconds timeout) {
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

Reply Connection::roundtrip(const Args& argv, std::chrono::milliseconds timeout) {
  ensure_connected();
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
  return reply;
}

void Connection::load(const Script& script) {
  Reply loaded = roundtrip({"SCRIPT", "LOAD", script.body}, options_.command_timeout);
  if (loaded.is_error()) {
    throw ReplyError(fmt::format("fairsem: SCRIPT LOAD of {} on {} failed: {}", script.name,
                                 endpoint_, loaded.str),
                     loaded.str);
  }
  if (expect_string(loaded, "the SCRIPT LOAD reply") != script.sha1) {
    throw ProtocolError(fmt::format("fairsem: {} returned SHA1 {} for script {}, expected {}",
                                    endpoint_, loaded.str, script.name, script.sha1));
  }
}

namespace {

// Redirections followed for one command before its last error reply is returned as it is.
constexpr int kMaxRedirects = 5;

/// Error replies of a master that was turned into a replica: the command did not run (a script
/// stops at its first write, and fairsem's scripts write nothing before it).
bool is_demoted(std::string_view error) {
  return starts_with(error, "READONLY") || starts_with(error, "UNBLOCKED") ||
         error.find("READONLY You can't write") != std::string_view::npos;
}

}  // namespace

Reply Connection::exchange(const Args& argv, std::chrono::milliseconds timeout,
                           const Script* script) {
  last_reply_elsewhere_ = false;
  bool reloaded = false;
  for (int hop = 0;; ++hop) {
    Reply reply = roundtrip(argv, timeout);
    if (!reply.is_error()) return reply;
    if (script != nullptr && !reloaded && starts_with(reply.str, "NOSCRIPT")) {
      // The server lost the script (SCRIPT FLUSH, a restart, a new master): load it, once.
      load(*script);
      reloaded = true;
      --hop;
      continue;
    }
    if (!discovery_ || hop >= kMaxRedirects) return reply;
    if (auto redirect = parse_redirect(reply.str, node_)) {
      if (redirect->kind == Redirect::Kind::ask) {
        last_reply_elsewhere_ = true;
        return ask(redirect->node, argv, timeout, script);
      }
      discovery_->moved(redirect->slot, redirect->node);
      if (slot_ < 0) slot_ = redirect->slot;
      broken_ = true;  // the next roundtrip connects to the slot's master
      continue;
    }
    if (is_demoted(reply.str)) {
      discovery_->forget();
      broken_ = true;
      continue;
    }
    return reply;
  }
}

Reply Connection::ask(const NodeAddress& node, const Args& argv, std::chrono::milliseconds timeout,
                      const Script* script) {
  // ASKING admits only the next command, so it precedes the command each time it is sent.
  Connection asked(discovery_->node_options(node));
  auto once = [&] {
    const Reply asking = asked.roundtrip({"ASKING"}, options_.command_timeout);
    if (asking.is_error()) {
      throw ReplyError(
          fmt::format("fairsem: ASKING on {} failed: {}", asked.endpoint(), asking.str),
          asking.str);
    }
    return asked.roundtrip(argv, timeout);
  };
  Reply reply = once();
  if (script != nullptr && reply.is_error() && starts_with(reply.str, "NOSCRIPT")) {
    asked.load(*script);
    reply = once();
  }
  return reply;
}

Reply Connection::command(const Args& argv) { return command(argv, options_.command_timeout); }

Reply Connection::command_in_place(const Args& argv, std::chrono::milliseconds reply_timeout) {
  if (argv.empty()) throw InvalidArgument("fairsem: a command needs at least its name");
  if (broken()) {
    throw ConnectionError(fmt::format(
        "fairsem: {} to {} not sent: the connection it is about was lost", argv[0], endpoint_));
  }
  last_reply_elsewhere_ = false;
  return roundtrip(argv, reply_timeout);
}

Reply Connection::command(const Args& argv, std::chrono::milliseconds reply_timeout) {
  if (argv.empty()) throw InvalidArgument("fairsem: a command needs at least its name");
  Reply reply = exchange(argv, reply_timeout, nullptr);
  if (reply.is_error()) {
    throw ReplyError(fmt::format("fairsem: {} on {} failed: {}", argv[0], endpoint_, reply.str),
                     reply.str);
  }
  return reply;
}

std::vector<Reply> Connection::pipeline(const std::vector<Args>& commands) {
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

Reply Connection::eval(const Script& script, const Args& keys, const Args& args) {
  const std::string numkeys = std::to_string(keys.size());
  Args argv;
  argv.reserve(3 + keys.size() + args.size());
  argv.push_back("EVALSHA");
  argv.push_back(script.sha1);
  argv.push_back(numkeys);
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());

  Reply reply = exchange(argv, options_.command_timeout, &script);
  if (reply.is_error()) {
    throw ReplyError(
        fmt::format("fairsem: script {} on {} failed: {}", script.name, endpoint_, reply.str),
        reply.str);
  }
  return reply;
}

}  // namespace fairsem::detail
