#include "fairsem/semaphore.hpp"

#include <fmt/format.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <condition_variable>
#include <functional>
#include <limits>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <utility>

#include "fairsem/detail/connection.hpp"
#include "fairsem/detail/replies.hpp"
#include "fairsem/detail/router.hpp"
#include "fairsem/detail/scripts.hpp"
#include "fairsem/detail/server_support.hpp"
#include "fairsem/detail/text.hpp"

namespace fairsem {

using detail::Args;
using detail::Connection;
using detail::kMaxLease;
using detail::kMaxLimit;
using detail::printable;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr std::size_t kMaxNameBytes = 200;
constexpr std::size_t kMaxOwnerInfoBytes = 1024;
// Ids per renew call: a few thousand keep one script run in the low milliseconds.
constexpr std::size_t kRenewChunk = 2000;
// Upper bounds of the acquire wait histogram's buckets (Metrics::acquire_wait); a last bucket,
// +infinity, takes the rest.
constexpr std::array<std::chrono::nanoseconds, 11> kWaitBounds = {
    milliseconds(1),     milliseconds(5),     milliseconds(10),   milliseconds(50),
    milliseconds(100),   milliseconds(500),   milliseconds(1000), milliseconds(5000),
    milliseconds(10000), milliseconds(30000), milliseconds(60000)};
// A script whose reply was lost is run again (it is idempotent per permit id).
constexpr int kScriptAttempts = 3;
// Replies that say the server did not run the script yet (loading its data after a restart,
// busy with another script, a replica without its master) are retried with backoff this often.
constexpr int kTransientAttempts = 12;
constexpr auto kTransientBackoffMax = std::chrono::milliseconds(500);

bool is_transient(const std::string& server_message) {
  return detail::starts_with(server_message, "LOADING") ||
         detail::starts_with(server_message, "BUSY ") ||
         detail::starts_with(server_message, "MASTERDOWN") ||
         // Redis Cluster: a slot being migrated, or a cluster that lost a shard for a moment.
         detail::starts_with(server_message, "TRYAGAIN") ||
         detail::starts_with(server_message, "CLUSTERDOWN");
}
constexpr std::size_t kMaxIdleConnections = 8;

std::string default_owner_info() {
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  std::string name = host[0] != '\0' ? std::string(host.data()) : std::string("unknown-host");
  return fmt::format("{}:{}", name, static_cast<long>(getpid()));
}

/// 128 random bits as 32 hex digits, from the kernel: a forked child never repeats its
/// parent's ids (a seeded generator copied by fork() would).
std::string random_id() {
  std::array<std::uint64_t, 2> bits{};
  std::size_t got = 0;
  auto* bytes = reinterpret_cast<unsigned char*>(bits.data());
  while (got < sizeof(bits)) {
    const ssize_t n = getrandom(bytes + got, sizeof(bits) - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (errno != EINTR) {
      throw std::system_error(errno, std::generic_category(), "fairsem: getrandom");
    }
  }
  return fmt::format("{:016x}{:016x}", bits[0], bits[1]);
}

/// Long enough for every retry of a release to find the receipt of a run whose reply was lost:
/// each attempt may wait for a reply and then reconnect with backoff.
milliseconds receipt_lifetime(const ConnectionOptions& c, milliseconds lease) {
  const auto reconnect = c.reconnect_attempts * (c.connect_timeout + c.reconnect_backoff_max);
  return std::max(lease, kScriptAttempts * (c.command_timeout + reconnect));
}

std::string seconds_string(milliseconds ms) {
  return fmt::format("{}.{:03}", ms.count() / 1000, ms.count() % 1000);
}

}  // namespace

void validate_name(std::string_view value, std::string_view what) {
  if (value.empty()) throw InvalidArgument(fmt::format("fairsem: {} must not be empty", what));
  if (value.size() > kMaxNameBytes) {
    throw InvalidArgument(fmt::format("fairsem: {} is {} bytes long; at most {} are allowed", what,
                                      value.size(), kMaxNameBytes));
  }
  for (std::size_t i = 0; i < value.size(); ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    const bool brace = c == '{' || c == '}';
    if (brace || detail::has_space_or_control(value.substr(i, 1))) {
      throw InvalidArgument(fmt::format(
          "fairsem: {} \"{}\" contains {} at byte {}; names may not contain '{{', '}}', "
          "whitespace or control bytes",
          what, printable(value),
          brace ? fmt::format("'{}'", value[i]) : printable(value.substr(i, 1)), i));
    }
  }
}

void SemaphoreOptions::validate() const {
  if (limit < 1 || limit > kMaxLimit) {
    throw InvalidArgument(
        fmt::format("fairsem: limit must be at least 1 and at most {}, got {}", kMaxLimit, limit));
  }
  if (lease.count() <= 0) {
    throw InvalidArgument(fmt::format("fairsem: lease must be positive, got {} ms", lease.count()));
  }
  if (lease > kMaxLease) {
    throw InvalidArgument(fmt::format("fairsem: lease must be at most {} ms (30 days), got {} ms",
                                      milliseconds(kMaxLease).count(), lease.count()));
  }
  if (renew_interval.count() < 0) {
    throw InvalidArgument(fmt::format("fairsem: renew_interval must not be negative, got {} ms",
                                      renew_interval.count()));
  }
  const milliseconds renew = effective_renew_interval();
  if (renew.count() == 0) {
    throw InvalidArgument(fmt::format(
        "fairsem: a lease of {} ms is too short to renew (the renew interval, lease / 3, "
        "would be 0 ms)",
        lease.count()));
  }
  if (renew >= lease) {
    throw InvalidArgument(
        fmt::format("fairsem: renew_interval ({} ms) must be shorter than the lease ({} ms)",
                    renew.count(), lease.count()));
  }
  if (min_replicas < 0) {
    throw InvalidArgument(
        fmt::format("fairsem: min_replicas must not be negative, got {}", min_replicas));
  }
  if (min_replicas > 0 && replica_timeout.count() <= 0) {
    throw InvalidArgument(fmt::format("fairsem: replica_timeout must be positive, got {} ms",
                                      replica_timeout.count()));
  }
  // A granted permit is not renewed while its WAIT runs, and waits up to one renew interval
  // for the watchdog's first round after it: both must fit in the lease with room to spare.
  if (min_replicas > 0 && replica_timeout > (lease - renew) / 2) {
    throw InvalidArgument(fmt::format(
        "fairsem: replica_timeout ({} ms) must be at most half of lease - renew_interval ({} ms "
        "here), so that a permit outlives the WAIT that confirms it",
        replica_timeout.count(), ((lease - renew) / 2).count()));
  }
  validate_name(key_prefix, "key_prefix");
  if (!permit_id.empty()) validate_name(permit_id, "permit_id");
  if (owner_info.size() > kMaxOwnerInfoBytes) {
    throw InvalidArgument(
        fmt::format("fairsem: owner_info is {} bytes long; at most {} are allowed",
                    owner_info.size(), kMaxOwnerInfoBytes));
  }
}

namespace detail {

struct PermitState {
  PermitState(std::string permit_id, long long permit_ticket, long long permit_slot,
              Clock::time_point permit_deadline)
      : id(std::move(permit_id)),
        ticket(permit_ticket),
        slot(permit_slot),
        deadline(permit_deadline.time_since_epoch().count()) {}

  Clock::time_point get_deadline() const noexcept {
    return Clock::time_point(Clock::duration(deadline.load(std::memory_order_acquire)));
  }
  void set_deadline(Clock::time_point t) noexcept {
    deadline.store(t.time_since_epoch().count(), std::memory_order_release);
  }

  const std::string id;
  const long long ticket;
  const long long slot;
  std::atomic<Clock::rep> deadline;
  std::atomic<bool> lost{false};
  std::atomic<bool> done{false};  // released, or dropped after a failed release
};

/// The counters behind FairSemaphore::metrics(). Relaxed atomics: each is a count on its own,
/// and orders nothing else, so counting takes no lock and no fence.
struct MetricCounters {
  using Counter = std::atomic<std::uint64_t>;

  static void add(Counter& counter, std::uint64_t n = 1) noexcept {
    counter.fetch_add(n, std::memory_order_relaxed);
  }
  static std::uint64_t get(const Counter& counter) noexcept {
    return counter.load(std::memory_order_relaxed);
  }

  void record_grant(Clock::duration waited) noexcept {
    add(grants);
    const auto ns = std::max(std::chrono::nanoseconds(0),
                             std::chrono::duration_cast<std::chrono::nanoseconds>(waited));
    std::size_t bucket = 0;
    while (bucket < kWaitBounds.size() && ns > kWaitBounds[bucket]) ++bucket;
    add(wait_buckets[bucket]);
    add(wait_nanoseconds, static_cast<std::uint64_t>(ns.count()));
  }

  Metrics snapshot() const {
    Metrics m;
    m.acquire_attempts = get(acquire_attempts);
    m.grants = get(grants);
    m.rejections = get(rejections);
    m.timeouts = get(timeouts);
    m.evictions_seen = get(evictions_seen);
    m.errors = get(errors);
    m.renewals = get(renewals);
    m.renewal_failures = get(renewal_failures);
    m.permits_lost = get(permits_lost);
    m.releases = get(releases);
    m.reconnects = get(*reconnects);
    Histogram& h = m.acquire_wait;
    h.bounds_seconds.reserve(wait_buckets.size());
    h.counts.reserve(wait_buckets.size());
    for (const auto bound : kWaitBounds) {
      h.bounds_seconds.push_back(std::chrono::duration<double>(bound).count());
    }
    h.bounds_seconds.push_back(std::numeric_limits<double>::infinity());
    // Cumulative, summed from one read of each bucket: the +infinity bucket is the count.
    for (const Counter& bucket : wait_buckets) {
      h.count += get(bucket);
      h.counts.push_back(h.count);
    }
    h.sum_seconds = static_cast<double>(get(wait_nanoseconds)) / 1e9;
    return m;
  }

  Counter acquire_attempts{0};
  Counter grants{0};
  Counter rejections{0};
  Counter timeouts{0};
  Counter evictions_seen{0};
  Counter errors{0};
  Counter renewals{0};
  Counter renewal_failures{0};
  Counter permits_lost{0};
  Counter releases{0};
  // Shared with every connection of the semaphore (Connection::count_reconnects).
  const std::shared_ptr<Counter> reconnects = std::make_shared<Counter>(0);
  std::array<Counter, kWaitBounds.size() + 1> wait_buckets{};  // one per bucket, not cumulative
  Counter wait_nanoseconds{0};
};

class SemaphoreCore : public std::enable_shared_from_this<SemaphoreCore> {
 public:
  /// `admin`: for SemaphoreAdmin, whose calls pass limit 0 ("whatever Redis stores"); the
  /// script then accepts only status and evict.
  SemaphoreCore(ConnectionOptions connection, std::string name, SemaphoreOptions options,
                bool admin = false);
  ~SemaphoreCore();
  SemaphoreCore(const SemaphoreCore&) = delete;
  SemaphoreCore& operator=(const SemaphoreCore&) = delete;

  void open();
  void connect();
  std::optional<Permit> try_acquire();
  std::optional<Permit> acquire(std::optional<Clock::time_point> deadline);
  /// What the public calls run: try_acquire (`wait` false), or acquire until `deadline` (none:
  /// no limit), counted in the metrics.
  std::optional<Permit> measured_acquire(bool wait, std::optional<Clock::time_point> deadline);
  ReleaseResult release(PermitState& state);
  bool renew(PermitState& state);
  std::size_t renew_all();
  Status status();
  EvictResult evict(const std::string& permit_id);
  ResizeResult resize(long long new_limit);

  const std::string& name() const noexcept { return name_; }
  const SemaphoreOptions& options() const noexcept { return options_; }
  Metrics metrics() const { return metrics_.snapshot(); }
  void log(LogLevel level, const std::string& message) const noexcept;

 private:
  /// A connection borrowed from the pool for one operation; returned by the destructor.
  class Borrowed {
   public:
    explicit Borrowed(SemaphoreCore& core) : core_(core), conn_(core.take_connection()) {}
    ~Borrowed() { core_.give_back(std::move(conn_)); }
    Borrowed(const Borrowed&) = delete;
    Borrowed& operator=(const Borrowed&) = delete;
    Connection& operator*() noexcept { return *conn_; }
    Connection* operator->() noexcept { return conn_.get(); }

   private:
    SemaphoreCore& core_;
    std::unique_ptr<Connection> conn_;
  };

  std::unique_ptr<Connection> take_connection();
  void give_back(std::unique_ptr<Connection> conn) noexcept;
  /// A new connection whose reconnects count in the metrics.
  std::unique_ptr<Connection> new_connection();

  /// Runs one operation of the semaphore script, again after a lost reply (up to
  /// kScriptAttempts in all). Refusals become LimitMismatchError / ReplyError.
  Reply run(Connection& conn, std::string_view op, const Args& extra);
  /// `ticket`: the ticket a polling waiter already has (0 on its first call).
  AcquireReply run_acquire(Connection& conn, const std::string& id, std::string_view mode,
                           long long ticket = 0);
  [[noreturn]] void throw_evicted(const std::string& id) const;
  /// WAIT for min_replicas replicas to have what this connection wrote; returns how many did.
  long long wait_replicas(Connection& conn);
  /// One wait (up to `wait`) for the wake-up of the queued request `id`, whose last call got
  /// `reply` and was sent at `sent`. True: promoted, and the permit can be taken as that call
  /// left it (its slot filled in). False: poll. Throws EvictedError.
  bool wait_for_wake_up(Connection& conn, const std::string& id, milliseconds wait,
                        AcquireReply& reply, Clock::time_point sent);
  /// After a grant: throws ReplicationError unless min_replicas acknowledged it.
  void await_replicas(Connection& conn, const std::string& id);
  Permit make_permit(const std::string& id, const AcquireReply& reply, Clock::time_point sent);
  /// Leaves the queue: removes the entry of `id` with `ticket` (0: whatever entry it has).
  void give_up(Connection& conn, const std::string& id, long long ticket) noexcept;
  std::string next_id() const {
    return options_.permit_id.empty() ? random_id() : options_.permit_id;
  }
  /// "semaphore 'NAME' on ENDPOINT", for messages (built once: every script call needs it).
  const std::string& where() const noexcept { return where_; }

  void mark_lost(PermitState& state, const std::string& reason);
  void forget(PermitState& state);
  static void watchdog_main(const std::weak_ptr<SemaphoreCore>& weak, SemaphoreCore* core);
  /// Before a watchdog round: a new connection in place of a broken (or missing) `conn`, counted
  /// as a reconnect once the watchdog had one (`connected`). Left null, and logged, on failure.
  void refresh_watchdog_connection(std::unique_ptr<Connection>& conn, bool& connected);
  void renew_round(Connection* conn, const std::vector<std::shared_ptr<PermitState>>& permits);
  /// One renew call for `permits`; marks those found gone as lost. Throws what run() throws.
  void renew_chunk(Connection& conn, const std::vector<PermitState*>& permits);
  /// Renewing `permits` failed with `error`: counted for each one still held, and reported to
  /// on_renew_failure for each whose lease has not run out yet.
  void renewal_failed(const std::vector<PermitState*>& permits, const std::string& error) noexcept;

  const ConnectionOptions connection_;
  const std::string name_;
  const SemaphoreOptions options_;
  const std::string endpoint_;
  const std::string where_;
  const std::string owner_info_;
  const std::string limit_arg_;
  const std::string lease_arg_;
  const std::string receipt_arg_;  // how long a release receipt outlives the release, in ms
  const std::string min_replicas_arg_;
  const std::string replica_timeout_arg_;
  const milliseconds renew_interval_;
  const milliseconds poll_interval_;
  // A woken waiter takes its permit without another call when more than this is left of it.
  const milliseconds direct_grant_margin_;
  // How long a grant's WAIT may take (replica_timeout with min_replicas, else 0).
  const milliseconds wait_allowance_;
  std::vector<std::string> keys_;
  Args key_args_;
  // Cluster and Sentinel: where the connections go (shared by all of them); null standalone.
  std::shared_ptr<detail::Router> router_;
  int slot_ = -1;  // the cluster hash slot of every key of the semaphore

  std::mutex pool_mu_;
  std::vector<std::unique_ptr<Connection>> idle_;

  std::atomic<bool> old_server_reported_{false};  // a too old server was logged once
  std::mutex mu_;                                 // guards live_, stop_, watchdog_
  std::condition_variable cv_;
  std::unordered_map<PermitState*, std::shared_ptr<PermitState>> live_;
  bool stop_ = false;
  std::thread watchdog_;

  MetricCounters metrics_;
};

SemaphoreCore::SemaphoreCore(ConnectionOptions connection, std::string name,
                             SemaphoreOptions options, bool admin)
    : connection_((connection.validate(), std::move(connection))),
      name_((validate_name(name, "semaphore name"), std::move(name))),
      options_((options.validate(), std::move(options))),
      endpoint_(connection_.endpoint()),
      where_(fmt::format("semaphore '{}' on {}", name_, endpoint_)),
      owner_info_(options_.owner_info.empty() ? default_owner_info() : options_.owner_info),
      limit_arg_(admin ? std::string("0") : std::to_string(options_.limit)),
      lease_arg_(std::to_string(options_.lease.count())),
      receipt_arg_(std::to_string(receipt_lifetime(connection_, options_.lease).count())),
      min_replicas_arg_(std::to_string(options_.min_replicas)),
      replica_timeout_arg_(std::to_string(options_.replica_timeout.count())),
      renew_interval_(options_.effective_renew_interval()),
      poll_interval_(std::max(milliseconds(1), std::min(options_.lease / 3, renew_interval_))),
      direct_grant_margin_(renew_interval_ + (options_.lease - renew_interval_) / 2),
      wait_allowance_(options_.min_replicas > 0 ? options_.replica_timeout : milliseconds(0)) {
  keys_ = detail::semaphore_keys(options_.key_prefix, name_);
  for (const std::string& k : keys_) key_args_.push_back(k);
  if (connection_.routed()) {
    router_ = std::make_shared<detail::Router>(connection_);
    slot_ = detail::key_slot(keys_[0]);
  }
}

SemaphoreCore::~SemaphoreCore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (watchdog_.joinable()) {
    // The last reference can be dropped on the watchdog thread itself (in on_lost); it then
    // sees stop_ and leaves without touching this object again.
    if (watchdog_.get_id() == std::this_thread::get_id()) {
      watchdog_.detach();
    } else {
      watchdog_.join();
    }
  }
}

void SemaphoreCore::log(LogLevel level, const std::string& message) const noexcept {
  // Off unless the application asked: a library does not write to its host's stderr.
  if (!options_.logger) return;
  try {
    options_.logger(level, message);
  } catch (...) {
    // A logger that throws must not turn a destructor into std::terminate.
  }
}

std::unique_ptr<Connection> SemaphoreCore::take_connection() {
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!idle_.empty()) {
      auto conn = std::move(idle_.back());
      idle_.pop_back();
      return conn;
    }
  }
  return new_connection();  // outside the lock
}

std::unique_ptr<Connection> SemaphoreCore::new_connection() {
  auto conn = std::make_unique<Connection>(connection_, router_, slot_);
  conn->count_reconnects(metrics_.reconnects);
  return conn;
}

void SemaphoreCore::give_back(std::unique_ptr<Connection> conn) noexcept {
  if (!conn) return;
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(conn));
}

Reply SemaphoreCore::run(Connection& conn, std::string_view op, const Args& extra) {
  Args args;
  args.reserve(3 + extra.size());
  args.push_back(op);
  args.push_back(limit_arg_);
  args.push_back(lease_arg_);
  args.insert(args.end(), extra.begin(), extra.end());
  Reply reply;
  auto backoff = std::chrono::milliseconds(20);
  for (int attempt = 1, transient = 1;; ++attempt) {
    try {
      reply = conn.eval(detail::scripts::semaphore, key_args_, args);
      break;
    } catch (const AuthError&) {
      throw;
    } catch (const ConnectionError& e) {
      // The script may have run and only its reply been lost; every operation is idempotent
      // per permit id, so running it again cannot grant or free a second permit.
      if (attempt >= kScriptAttempts) throw;
      log(LogLevel::warning,
          fmt::format("fairsem: {}: {} interrupted ({}); running it again", where(), op, e.what()));
    } catch (const ReplyError& e) {
      if (is_transient(e.server_message()) && transient < kTransientAttempts) {
        // The script did not run; waiting does not use up the lost-reply attempts.
        ++transient;
        --attempt;
        std::this_thread::sleep_for(backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(kTransientBackoffMax));
        continue;
      }
      if (const auto feature = detail::missing_server_feature(e.server_message())) {
        throw ReplyError(detail::unsupported_server_message(
                             fmt::format("fairsem: {}: {} failed", where(), op), *feature,
                             detail::describe_server(conn), e.server_message()),
                         e.server_message());
      }
      throw ReplyError(fmt::format("fairsem: {}: {} failed: {}", where(), op, e.server_message()),
                       e.server_message());
    }
  }
  detail::check_script_reply(reply, {where_, keys_[3], options_.limit});
  return reply;
}

void SemaphoreCore::connect() {
  Borrowed conn(*this);  // connects now, so a bad address or password is reported here
}

void SemaphoreCore::open() {
  if (connection_.tls.enabled && connection_.tls.insecure) {
    log(LogLevel::warning,
        fmt::format("fairsem: {}: TLS certificate verification is off (insecure): any server "
                    "can pose as this one",
                    where()));
  }
  Borrowed conn(*this);
  detail::decode_open(run(*conn, "open", {}));
}

AcquireReply SemaphoreCore::run_acquire(Connection& conn, const std::string& id,
                                        std::string_view mode, long long ticket) {
  Reply reply = ticket == 0 ? run(conn, "acquire", {id, mode, owner_info_})
                            : run(conn, "acquire", {id, mode, owner_info_, std::to_string(ticket)});
  return detail::decode_acquire(reply);
}

void SemaphoreCore::throw_evicted(const std::string& id) const {
  throw EvictedError(
      fmt::format("fairsem: {}: the queued request {} was evicted (removed on purpose)", where(),
                  id),
      id);
}

long long SemaphoreCore::wait_replicas(Connection& conn) {
  // On the socket that wrote, as it is: WAIT counts only that socket's writes, so a WAIT sent
  // again on a new connection (after a reconnect or a redirection) would vouch for nothing.
  // An error reply (UNBLOCKED: the master was demoted meanwhile) acknowledges nothing.
  const Reply acked = conn.command_in_place({"WAIT", min_replicas_arg_, replica_timeout_arg_},
                                            options_.replica_timeout + connection_.command_timeout);
  if (acked.is_error()) {
    log(LogLevel::warning,
        fmt::format("fairsem: {}: WAIT failed ({}); counted as acknowledged by no replica", where(),
                    acked.str));
    return 0;
  }
  return detail::expect_integer(acked, "the WAIT reply");
}

void SemaphoreCore::await_replicas(Connection& conn, const std::string& id) {
  if (options_.min_replicas == 0) return;
  const long long acked = wait_replicas(conn);
  if (acked >= options_.min_replicas) return;
  throw ReplicationError(
      fmt::format("fairsem: {}: permit {} was granted, but only {} of {} replicas acknowledged "
                  "it within {} ms, so a failover could lose it; {}",
                  where(), id, acked, options_.min_replicas, options_.replica_timeout.count(),
                  options_.permit_id.empty()
                      ? "it was given back and the acquire did not happen"
                      : "the acquire failed, and the caller-chosen permit id is left as it is "
                        "(it expires with its lease unless a holder of that id renews it)"),
      acked, options_.min_replicas);
}

Permit SemaphoreCore::make_permit(const std::string& id, const AcquireReply& reply,
                                  Clock::time_point sent) {
  // The lease is counted from when the request left, never from this machine's wall clock.
  auto state = std::make_shared<PermitState>(id, reply.ticket, reply.slot, sent + reply.lease);
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The thread first: if it cannot start, no orphan entry is left to be renewed forever.
    if (options_.auto_renew && !watchdog_.joinable()) {
      watchdog_ = std::thread(&SemaphoreCore::watchdog_main, weak_from_this(), this);
    }
    live_.emplace(state.get(), state);
  }
  return {shared_from_this(), std::move(state)};
}

std::optional<Permit> SemaphoreCore::try_acquire() {
  const std::string id = next_id();
  Borrowed conn(*this);
  const auto sent = Clock::now();
  AcquireReply reply;
  try {
    reply = run_acquire(*conn, id, "try");
    if (reply.state != AcquireState::granted) return std::nullopt;
    await_replicas(*conn, id);
    return make_permit(id, reply, sent);
  } catch (...) {
    // The grant may have happened with its reply lost, or the permit could not be set up.
    if (options_.permit_id.empty()) give_up(*conn, id, reply.ticket);
    throw;
  }
}

std::optional<Permit> SemaphoreCore::acquire(std::optional<Clock::time_point> deadline) {
  // No time to wait: like try_acquire, never queue.
  if (deadline && *deadline <= Clock::now()) return try_acquire();
  const std::string id = next_id();
  Borrowed conn(*this);  // this waiter's own connection, also for its BRPOP
  auto sent = Clock::now();
  AcquireReply reply;
  try {
    reply = run_acquire(*conn, id, "queue");
    while (reply.state != AcquireState::granted) {
      const auto now = Clock::now();
      if (deadline && now >= *deadline) {
        give_up(*conn, id, reply.ticket);
        return std::nullopt;
      }
      milliseconds wait = poll_interval_;
      if (deadline) {
        const auto left = std::chrono::ceil<milliseconds>(*deadline - now);
        wait = std::max(milliseconds(1), std::min(wait, left));
      }
      if (wait_for_wake_up(*conn, id, wait, reply, sent)) {
        await_replicas(*conn, id);
        return make_permit(id, reply, sent);
      }
      sent = Clock::now();
      reply = run_acquire(*conn, id, "queue", reply.ticket);
      if (reply.state == AcquireState::evicted) throw_evicted(id);
    }
    await_replicas(*conn, id);
    return make_permit(id, reply, sent);
  } catch (const EvictedError&) {
    throw;  // the entry is gone already
  } catch (const ReplicationError&) {
    // A caller-chosen id may be another handle's permit, granted to this call as well: it is
    // left to its lease (as try_acquire does), never given up here.
    if (options_.permit_id.empty()) give_up(*conn, id, reply.ticket);
    throw;
  } catch (...) {
    // Without a ticket (the first call failed) only a random id is surely this call's own: a
    // caller-chosen one may name another handle's entry, which then must not be removed.
    if (reply.ticket != 0 || options_.permit_id.empty()) give_up(*conn, id, reply.ticket);
    throw;
  }
}

std::optional<Permit> SemaphoreCore::measured_acquire(bool wait,
                                                      std::optional<Clock::time_point> deadline) {
  const auto start = Clock::now();
  MetricCounters::add(metrics_.acquire_attempts);
  // A deadline already passed leaves no time to wait (acquire() does not queue then either):
  // finding no permit is a rejection, as for try_acquire, not a timeout.
  const bool queue = wait && !(deadline && *deadline <= start);
  try {
    std::optional<Permit> permit = queue ? acquire(deadline) : try_acquire();
    if (permit) {
      metrics_.record_grant(Clock::now() - start);
    } else {
      MetricCounters::add(queue ? metrics_.timeouts : metrics_.rejections);
    }
    return permit;
  } catch (const EvictedError&) {
    MetricCounters::add(metrics_.evictions_seen);
    throw;
  } catch (...) {
    MetricCounters::add(metrics_.errors);
    throw;
  }
}

bool SemaphoreCore::wait_for_wake_up(Connection& conn, const std::string& id, milliseconds wait,
                                     AcquireReply& reply, Clock::time_point sent) {
  try {
    // Woken by the release (or reap) that promotes this waiter; on timeout the acquire after
    // it renews the queue entry and reports promotion, so a lost wake-up costs one poll.
    const Reply woken = conn.command({"BRPOP", keys_[5] + id, seconds_string(wait)},
                                     wait + connection_.command_timeout);
    const detail::WakeUp wake_up = detail::decode_wake(woken);
    const detail::WakeReason why = wake_up.reason;
    // An eviction already removed the entry; its marker is consumed here.
    if (why == detail::WakeReason::evicted) throw_evicted(id);
    reply.slot = wake_up.slot;
    // Promoted: the permit is this entry, with the deadline its last call set (estimated from
    // when that call was sent). Taken as it is when the watchdog's next round surely comes with
    // half the usual margin left (and room for the WAIT of min_replicas); otherwise the poll
    // renews it first. With min_replicas, the WAIT must follow a write of this socket: a
    // wake-up popped on another node (an ASK during a slot migration) is confirmed by the poll.
    return why == detail::WakeReason::promoted &&
           sent + reply.lease - Clock::now() > direct_grant_margin_ + wait_allowance_ &&
           !(options_.min_replicas > 0 && conn.last_reply_elsewhere());
  } catch (const ConnectionError&) {
    // The poll reconnects, or reports why it cannot.
  } catch (const ReplyError& e) {
    // BRPOP refused. A transient refusal (a restarted server still loading, a cluster without
    // this slot's shard for a moment) goes straight to the poll, which retries it with backoff:
    // sleeping first would leave a promoted waiter unaware of its permit. Anything else (a
    // foreign key in the way) waits as long as the wake-up could have taken, then polls as on
    // a timeout.
    // A server too old for BRPOP's fractional timeout (Redis < 6.0) is said once; its waiters
    // poll.
    if (const auto feature = detail::missing_server_feature(e.server_message())) {
      if (!old_server_reported_.exchange(true)) {
        log(LogLevel::warning,
            detail::unsupported_server_message(
                fmt::format("fairsem: {}: waiting for a wake-up failed", where()), *feature,
                detail::describe_server(conn), e.server_message()) +
                "; its waiters poll instead");
      }
      std::this_thread::sleep_for(wait);
    } else if (!is_transient(e.server_message())) {
      log(LogLevel::warning,
          fmt::format("fairsem: {}: waiting for a wake-up failed ({}); polling instead", where(),
                      e.what()));
      std::this_thread::sleep_for(wait);
    }
  }
  return false;
}

void SemaphoreCore::give_up(Connection& conn, const std::string& id, long long ticket) noexcept {
  // Removes the queue entry and the wake list; if the waiter was promoted a moment ago, this
  // frees the permit and wakes the next waiter.
  try {
    const std::string ticket_arg = std::to_string(ticket);
    run(conn, "release", {id, ticket_arg, receipt_arg_, "leaving"});
  } catch (const std::exception& e) {
    log(LogLevel::warning, fmt::format("fairsem: {}: could not leave the queue ({}); the entry "
                                       "expires within one lease",
                                       where(), e.what()));
  }
}

void SemaphoreCore::forget(PermitState& state) {
  std::lock_guard<std::mutex> lock(mu_);
  live_.erase(&state);
}

ReleaseResult SemaphoreCore::release(PermitState& state) {
  if (state.done.exchange(true)) return ReleaseResult::already_released;
  forget(state);
  Reply reply = [&] {
    Borrowed conn(*this);
    const std::string ticket = std::to_string(state.ticket);
    return run(*conn, "release", {state.id, ticket, receipt_arg_});
  }();
  // released_before: an earlier run whose reply was lost released it (it left a receipt).
  if (detail::decode_release(reply) != detail::ReleaseState::not_present) {
    MetricCounters::add(metrics_.releases);
    return ReleaseResult::released;
  }
  // Gone before anyone noticed (e.g. an expired lease without auto_renew): lost all the same.
  if (!state.lost.exchange(true)) MetricCounters::add(metrics_.permits_lost);
  return ReleaseResult::expired;
}

void SemaphoreCore::mark_lost(PermitState& state, const std::string& reason) {
  if (state.lost.exchange(true)) return;
  MetricCounters::add(metrics_.permits_lost);
  forget(state);
  if (options_.on_lost) {
    try {
      options_.on_lost(state.id, reason);
    } catch (const std::exception& e) {
      log(LogLevel::error, fmt::format("fairsem: {}: on_lost threw: {}", where(), e.what()));
    } catch (...) {
      log(LogLevel::error, fmt::format("fairsem: {}: on_lost threw", where()));
    }
  } else {
    log(LogLevel::warning,
        fmt::format("fairsem: {}: permit {} was lost: {}", where(), state.id, reason));
  }
}

void SemaphoreCore::renew_chunk(Connection& conn, const std::vector<PermitState*>& permits) {
  std::vector<std::string> tickets;
  tickets.reserve(permits.size());
  for (const PermitState* p : permits) tickets.push_back(std::to_string(p->ticket));
  Args args;  // id, ticket, id, ticket...
  args.reserve(2 * permits.size());
  for (std::size_t i = 0; i < permits.size(); ++i) {
    args.push_back(permits[i]->id);
    args.push_back(tickets[i]);
  }
  const auto sent = Clock::now();
  detail::RenewReply renewed;
  // With min_replicas, a renewal only counts once replicas have it: a failover to one of them
  // must not bring back an older deadline than the holder believes in.
  std::string unacknowledged;  // why not, when too few replicas acknowledged
  try {
    Reply reply = run(conn, "renew", args);
    renewed = detail::decode_renew(reply, permits.size());
    const long long acked = options_.min_replicas > 0 ? wait_replicas(conn) : 0;
    if (acked < options_.min_replicas) {
      unacknowledged = fmt::format(
          "fairsem: {}: only {} of {} replicas acknowledged the renewal of {} permits within {} "
          "ms; their deadlines stay as they were",
          where(), acked, options_.min_replicas, permits.size(), options_.replica_timeout.count());
      log(LogLevel::warning, unacknowledged);
    }
  } catch (const std::exception& e) {
    renewal_failed(permits, e.what());
    throw;
  }
  const auto deadline = sent + renewed.lease;
  std::vector<PermitState*> unconfirmed;  // still held, but replicas lack the renewal
  std::uint64_t extended = 0;
  for (std::size_t i = 0; i < permits.size(); ++i) {
    PermitState& state = *permits[i];
    if (state.done.load()) continue;
    switch (renewed.states[i]) {
      case detail::RenewState::held:
        if (unacknowledged.empty()) {
          state.set_deadline(deadline);
          ++extended;
        } else {
          unconfirmed.push_back(&state);
        }
        break;
      case detail::RenewState::evicted:
        mark_lost(state, "the permit was evicted (removed on purpose, e.g. by `fairsem evict`)");
        break;
      case detail::RenewState::gone:
        mark_lost(state,
                  "the permit is no longer in Redis (its lease ran out or its keys were removed)");
        break;
      case detail::RenewState::waiting:
        // Only when the slot bookkeeping was rebuilt after keys were changed behind its back.
        mark_lost(state,
                  "the permit's entry is queued again, without a slot (the semaphore's "
                  "keys were changed behind its back)");
        break;
    }
  }
  MetricCounters::add(metrics_.renewals, extended);
  if (!unconfirmed.empty()) renewal_failed(unconfirmed, unacknowledged);
}

void SemaphoreCore::renewal_failed(const std::vector<PermitState*>& permits,
                                   const std::string& error) noexcept {
  const auto now = Clock::now();
  std::uint64_t failed = 0;
  for (const PermitState* state : permits) {
    if (state->done.load() || state->lost.load()) continue;
    ++failed;
    const auto left = state->get_deadline() - now;
    // A lease already run out is reported as lost instead (by the caller, or at the next try).
    if (!options_.on_renew_failure || left <= Clock::duration::zero()) continue;
    try {
      PermitInfo info;
      info.id = state->id;
      info.ticket = state->ticket;
      info.lease_left = std::chrono::ceil<milliseconds>(left);
      info.owner = owner_info_;
      info.slot = state->slot;
      options_.on_renew_failure(info, error);
    } catch (const std::exception& e) {
      log(LogLevel::error,
          fmt::format("fairsem: {}: on_renew_failure threw: {}", where(), e.what()));
    } catch (...) {
      log(LogLevel::error, fmt::format("fairsem: {}: on_renew_failure threw", where()));
    }
  }
  MetricCounters::add(metrics_.renewal_failures, failed);
}

bool SemaphoreCore::renew(PermitState& state) {
  if (state.done.load() || state.lost.load()) return false;
  Borrowed conn(*this);
  renew_chunk(*conn, {&state});
  return !state.lost.load();
}

std::size_t SemaphoreCore::renew_all() {
  std::vector<std::shared_ptr<PermitState>> permits;
  {
    std::lock_guard<std::mutex> lock(mu_);
    permits.reserve(live_.size());
    for (const auto& entry : live_) permits.push_back(entry.second);
  }
  if (permits.empty()) return 0;
  {
    Borrowed conn(*this);
    std::vector<PermitState*> chunk;
    for (std::size_t begin = 0; begin < permits.size(); begin += kRenewChunk) {
      const std::size_t end = std::min(permits.size(), begin + kRenewChunk);
      chunk.clear();
      for (std::size_t i = begin; i < end; ++i) chunk.push_back(permits[i].get());
      renew_chunk(*conn, chunk);
    }
  }
  return static_cast<std::size_t>(std::count_if(permits.begin(), permits.end(), [](const auto& p) {
    return !p->done.load() && !p->lost.load();
  }));
}

void SemaphoreCore::renew_round(Connection* conn,
                                const std::vector<std::shared_ptr<PermitState>>& permits) {
  for (std::size_t begin = 0; begin < permits.size(); begin += kRenewChunk) {
    const std::size_t end = std::min(permits.size(), begin + kRenewChunk);
    std::vector<PermitState*> chunk;
    chunk.reserve(end - begin);
    for (std::size_t i = begin; i < end; ++i) chunk.push_back(permits[i].get());
    try {
      if (conn == nullptr) {
        const std::string error = fmt::format("fairsem: cannot connect to {}", endpoint_);
        renewal_failed(chunk, error);  // renew_chunk reports its own failures
        throw ConnectionError(error);
      }
      renew_chunk(*conn, chunk);
    } catch (const std::exception& e) {
      const auto now = Clock::now();
      log(LogLevel::warning, fmt::format("fairsem: {}: renewing {} permits failed: {}", where(),
                                         chunk.size(), e.what()));
      for (PermitState* state : chunk) {
        if (!state->done.load() && now >= state->get_deadline()) {
          mark_lost(*state, fmt::format("the lease ran out while renewals failed ({})", e.what()));
        }
      }
    }
  }
}

void SemaphoreCore::refresh_watchdog_connection(std::unique_ptr<Connection>& conn,
                                                bool& connected) {
  if (conn && !conn->broken()) return;
  try {
    conn = new_connection();
    if (std::exchange(connected, true)) MetricCounters::add(*metrics_.reconnects);
  } catch (const std::exception& e) {
    conn.reset();
    log(LogLevel::warning,
        fmt::format("fairsem: {}: watchdog cannot connect: {}", where(), e.what()));
  }
}

void SemaphoreCore::watchdog_main(const std::weak_ptr<SemaphoreCore>& weak, SemaphoreCore* core) {
  std::unique_ptr<Connection> conn;
  bool connected = false;  // the watchdog has had a connection
  std::unique_lock<std::mutex> lock(core->mu_);
  auto next = Clock::now() + core->renew_interval_;
  for (;;) {
    core->cv_.wait_until(lock, next, [&] { return core->stop_; });
    if (core->stop_) return;
    if (Clock::now() < next) continue;  // woken for a new permit; keep the cadence
    std::shared_ptr<SemaphoreCore> self = weak.lock();
    if (!self) return;  // being destroyed elsewhere; the destructor sets stop_ and joins
    const auto round = Clock::now();
    std::vector<std::shared_ptr<PermitState>> permits;
    permits.reserve(core->live_.size());
    for (const auto& entry : core->live_) permits.push_back(entry.second);
    lock.unlock();
    if (!permits.empty()) {
      core->refresh_watchdog_connection(conn, connected);
      core->renew_round(conn.get(), permits);
    }
    permits.clear();
    self.reset();
    // If that was the last reference, the destructor ran on this thread and detached it.
    if (weak.expired()) return;
    lock.lock();
    next = round + core->renew_interval_;
  }
}

Status SemaphoreCore::status() {
  Reply reply = [&] {
    Borrowed conn(*this);
    return run(*conn, "status", {});
  }();
  return detail::decode_status(reply);
}

EvictResult SemaphoreCore::evict(const std::string& permit_id) {
  validate_name(permit_id, "permit id");
  Reply reply = [&] {
    Borrowed conn(*this);
    return run(*conn, "evict", {permit_id});
  }();
  return detail::decode_evict(reply);
}

ResizeResult SemaphoreCore::resize(long long new_limit) {
  if (new_limit < 1 || new_limit > kMaxLimit) {
    throw InvalidArgument(
        fmt::format("fairsem: {}: a new limit must be at least 1 and at most {}, "
                    "got {}",
                    where(), kMaxLimit, new_limit));
  }
  const std::string limit = std::to_string(new_limit);
  Reply reply = [&] {
    Borrowed conn(*this);
    return run(*conn, "resize", {limit});
  }();
  const detail::ResizeReply r = detail::decode_resize(reply);
  return {r.old_limit, r.new_limit, r.promoted};
}

std::vector<std::string> semaphore_keys(std::string_view key_prefix, std::string_view name) {
  const std::string base = fmt::format("{}:{{{}}}:", key_prefix, name);
  return {base + "owner", base + "time",      base + "counter", base + "meta", base + "info",
          base + "wake:", base + "released:", base + "slots",   base + "free"};
}

}  // namespace detail

// --- Permit ---------------------------------------------------------------------------------

Permit::Permit() noexcept = default;

Permit::Permit(std::shared_ptr<detail::SemaphoreCore> core,
               std::shared_ptr<detail::PermitState> state) noexcept
    : core_(std::move(core)), state_(std::move(state)) {}

Permit::Permit(Permit&& other) noexcept
    : core_(std::move(other.core_)), state_(std::move(other.state_)) {}

Permit& Permit::operator=(Permit&& other) noexcept {
  if (this != &other) {
    release_quietly();
    core_ = std::move(other.core_);
    state_ = std::move(other.state_);
  }
  return *this;
}

Permit::~Permit() { release_quietly(); }

void Permit::release_quietly() noexcept {
  if (!state_ || state_->done.load()) return;
  try {
    release();
  } catch (const std::exception& e) {
    core_->log(LogLevel::warning,
               fmt::format("fairsem: semaphore '{}': releasing permit {} failed ({}); it expires "
                           "with its lease",
                           core_->name(), state_->id, e.what()));
  }
}

bool Permit::held() const noexcept { return state_ && !state_->done.load(); }

const std::string& Permit::id() const {
  static const std::string empty;
  return state_ ? state_->id : empty;
}

long long Permit::fencing_token() const { return state_ ? state_->ticket : 0; }

long long Permit::slot() const { return state_ ? state_->slot : -1; }

std::chrono::steady_clock::time_point Permit::deadline() const {
  return state_ ? state_->get_deadline() : Clock::time_point();
}

bool Permit::lost() const noexcept {
  if (!state_) return false;
  if (state_->lost.load()) return true;
  // A lease that ran out without a renewal is as good as lost, even before anyone checked.
  return !state_->done.load() && Clock::now() >= state_->get_deadline();
}

bool Permit::renew() {
  if (!state_) return false;
  // Local copies: on_lost may destroy this Permit (and with it the last FairSemaphore core).
  auto core = core_;
  auto state = state_;
  return core->renew(*state);
}

ReleaseResult Permit::release() {
  if (!state_) return ReleaseResult::already_released;
  auto core = core_;
  auto state = state_;
  return core->release(*state);
}

// --- FairSemaphore --------------------------------------------------------------------------

FairSemaphore::FairSemaphore(ConnectionOptions connection, std::string name,
                             SemaphoreOptions options)
    : core_(std::make_shared<detail::SemaphoreCore>(std::move(connection), std::move(name),
                                                    std::move(options))) {
  core_->open();
}

FairSemaphore::FairSemaphore(FairSemaphore&&) noexcept = default;
FairSemaphore& FairSemaphore::operator=(FairSemaphore&&) noexcept = default;
FairSemaphore::~FairSemaphore() = default;

std::optional<Permit> FairSemaphore::try_acquire() {
  return core_->measured_acquire(false, std::nullopt);
}

Permit FairSemaphore::acquire() { return std::move(*core_->measured_acquire(true, std::nullopt)); }

std::optional<Permit> FairSemaphore::acquire_until_steady(Clock::time_point deadline) {
  return core_->measured_acquire(true, deadline);
}

std::size_t FairSemaphore::renew_all() { return core_->renew_all(); }

Status FairSemaphore::status() { return core_->status(); }

EvictResult FairSemaphore::evict(const std::string& permit_id) { return core_->evict(permit_id); }

ResizeResult FairSemaphore::resize(long long new_limit) { return core_->resize(new_limit); }

const std::string& FairSemaphore::name() const noexcept { return core_->name(); }

const SemaphoreOptions& FairSemaphore::options() const noexcept { return core_->options(); }

Metrics FairSemaphore::metrics() const { return core_->metrics(); }

// --- SemaphoreAdmin -------------------------------------------------------------------------

namespace {

SemaphoreOptions admin_options(std::string key_prefix) {
  SemaphoreOptions o;
  o.key_prefix = std::move(key_prefix);
  o.auto_renew = false;
  return o;
}

}  // namespace

SemaphoreAdmin::SemaphoreAdmin(ConnectionOptions connection, std::string name,
                               std::string key_prefix)
    : core_(std::make_shared<detail::SemaphoreCore>(std::move(connection), std::move(name),
                                                    admin_options(std::move(key_prefix)),
                                                    /*admin=*/true)) {
  core_->connect();
}

SemaphoreAdmin::SemaphoreAdmin(SemaphoreAdmin&&) noexcept = default;
SemaphoreAdmin& SemaphoreAdmin::operator=(SemaphoreAdmin&&) noexcept = default;
SemaphoreAdmin::~SemaphoreAdmin() = default;

Status SemaphoreAdmin::status() { return core_->status(); }

EvictResult SemaphoreAdmin::evict(const std::string& permit_id) { return core_->evict(permit_id); }

ResizeResult SemaphoreAdmin::resize(long long new_limit) { return core_->resize(new_limit); }

const std::string& SemaphoreAdmin::name() const noexcept { return core_->name(); }

}  // namespace fairsem
