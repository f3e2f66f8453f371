// fairsem_stress: P worker processes x T threads loop acquire -> critical section -> release on
// one semaphore with limit L units, each request asking for one of the --weights units (some
// giving part of them back half way through), for S seconds, against a private redis-server
// (appendonly, appendfsync always), while the driver injects faults at random moments: SIGKILL
// and SIGSTOP of workers, Redis restarts, CLIENT KILL, SCRIPT FLUSH, and network faults through
// a proxy. Every critical section, and every timed wait that gave up, is logged to shared
// memory; afterwards checker.cpp proves the promises from that log alone, counted in units, and
// the driver checks that nothing is left in Redis.
//
//   fairsem_stress --seconds 60 --processes 4 --threads 4 --limit 4 --weights 1,2,3 --faults all
//
// Exit status 0 when every check held and every requested fault was injected, 1 otherwise.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "checker.hpp"
#include "fairsem/fairsem.hpp"
#include "fairsem/impl/connection.hpp"
#include "fault_proxy.hpp"
#include "redis_server.hpp"
#include "shared_log.hpp"

extern char** environ;

namespace fairsem::stress {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}
std::int64_t to_ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
std::int64_t ms_to_ns(std::int64_t ms) { return ms * 1'000'000; }

void copy_string(char* dst, std::size_t size, const std::string& src) {
  const std::size_t n = std::min(size - 1, src.size());
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

// --- the shared log ---------------------------------------------------------------------------

/// The log lives in a memfd: nothing to clean up however the run ends. Workers inherit the
/// descriptor (it is not close-on-exec) and map it by number.
class SharedMapping {
 public:
  /// Creates a log with room for `capacity` records.
  explicit SharedMapping(std::uint64_t capacity) : size_(SharedLog::bytes_for(capacity)) {
    fd_ = ::memfd_create("fairsem-stress-log", 0);
    if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "memfd_create");
    if (::ftruncate(fd_, static_cast<off_t>(size_)) != 0) {
      const int saved = errno;
      ::close(fd_);
      throw std::system_error(saved, std::generic_category(), "ftruncate of the log");
    }
    map();
    log_ = new (log_) SharedLog{};
    log_->magic = kMagic;
    log_->capacity = capacity;
  }
  /// Maps the log a driver created, by its inherited descriptor.
  explicit SharedMapping(int fd) : fd_(fd) {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw std::system_error(errno, std::generic_category(), "fstat");
    size_ = static_cast<std::size_t>(st.st_size);
    map();
    if (size_ < sizeof(SharedLog) || log_->magic != kMagic) {
      throw std::runtime_error("descriptor " + std::to_string(fd) + " is not a stress log");
    }
  }
  ~SharedMapping() {
    ::munmap(log_, size_);
    ::close(fd_);
  }
  SharedMapping(const SharedMapping&) = delete;
  SharedMapping& operator=(const SharedMapping&) = delete;

  SharedLog& log() const noexcept { return *log_; }
  int fd() const noexcept { return fd_; }

 private:
  void map() {
    void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap");
    log_ = static_cast<SharedLog*>(p);
  }

  int fd_ = -1;
  std::size_t size_ = 0;
  SharedLog* log_ = nullptr;
};

// --- the worker -------------------------------------------------------------------------------

ConnectionOptions worker_connection(const std::string& url) {
  ConnectionOptions c = ConnectionOptions::from_url(url);
  c.connect_timeout = milliseconds(500);
  c.command_timeout = milliseconds(1000);
  c.reconnect_attempts = 10;
  c.reconnect_backoff_min = milliseconds(10);
  c.reconnect_backoff_max = milliseconds(200);
  return c;
}

/// Takes the next record; null (and the run ends) when the log is full.
Record* next_record(SharedLog& log) {
  const std::uint64_t i = log.next_record.fetch_add(1);
  if (i >= log.capacity) {
    log.full.store(1);
    log.stop.store(1);
    return nullptr;
  }
  return &log.record(i);
}

/// A partial release of `back` units, logged: the instant the holder stops using them, and
/// the slots it kept (as it means to keep them, the lowest, until the permit says which).
void give_back(Record& r, ProcessSlot& ps, Permit& permit, const std::vector<long long>& slots,
               long long back) {
  const auto keep =
      std::min(slots.size(), static_cast<std::size_t>(std::max(0LL, permit.count() - back)));
  const auto write_kept = [&r](const std::vector<long long>& kept, std::size_t n) {
    r.kept_count = static_cast<std::int32_t>(n);
    std::copy_n(kept.begin(), std::min<std::size_t>(n, kMaxUnits), r.kept);
  };
  write_kept(slots, keep);
  // If the process dies in the call (a blackholed connection holds it there for seconds), its
  // lease, renewed by nobody meanwhile, may run out in Redis before the kill.
  r.deadline_ns = to_ns(permit.deadline());
  r.partial_ns = now_ns();
  // Logged before the call: once it reaches Redis the slots may pass on at once, and a SIGKILL
  // may come before it returns.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  try {
    (void)permit.release(back);
  } catch (const Error&) {
    r.partial_failed = 1;
    ps.release_errors.fetch_add(1);
    return;
  }
  if (permit.held()) {
    const std::vector<long long> kept = permit.slots();
    write_kept(kept, kept.size());
  }
  r.deadline_ns = to_ns(permit.deadline());
}

/// One request of a worker thread.
struct Request {
  Mode mode = Mode::acquire;
  long long units = 1;
  milliseconds timeout{0};  // try_acquire_for
  std::int64_t wait_ns = 0;
};

std::optional<Permit> ask(FairSemaphore& sem, const Request& req) {
  switch (req.mode) {
    case Mode::try_acquire:
      return sem.try_acquire(req.units);
    case Mode::try_acquire_for:
      return sem.try_acquire_for(req.units, req.timeout);
    case Mode::acquire:
      break;
  }
  return sem.acquire(req.units);
}

/// Logs a try_acquire_for that gave up: it was queued all that time, and the checker makes sure
/// nobody who asked later got in meanwhile. False when the log is full.
bool log_timeout(SharedLog& log, const Request& req, std::int64_t end_ns) {
  Record* r = next_record(log);
  if (r == nullptr) return false;
  r->units = static_cast<std::int32_t>(req.units);
  r->wait_ns = req.wait_ns;
  r->enter_ns = end_ns;
  r->deadline_ns = req.wait_ns + ms_to_ns(req.timeout.count());
  r->pid = static_cast<std::int32_t>(::getpid());
  r->mode = static_cast<std::uint8_t>(req.mode);
  r->state.store(timed_out, std::memory_order_release);
  return true;
}

/// The critical section of a granted permit, logged: enter, hold (sometimes giving units back
/// half way through), leave, release. False when the log is full (the permit is then released
/// by its destructor).
bool hold(SharedLog& log, ProcessSlot& ps, ThreadSlot& ts, Permit& permit, const Request& req,
          std::mt19937_64& rng) {
  const Config& cfg = log.config;
  Record* record = next_record(log);
  if (record == nullptr) return false;
  Record& r = *record;
  r.token = permit.fencing_token();
  r.units = static_cast<std::int32_t>(req.units);
  const std::vector<long long> slots = permit.slots();
  r.slot_count = static_cast<std::int32_t>(slots.size());
  std::copy_n(slots.begin(), std::min<std::size_t>(slots.size(), kMaxUnits), r.slots);
  r.wait_ns = req.wait_ns;
  r.enter_ns = now_ns();
  r.deadline_ns = to_ns(permit.deadline());
  r.pid = static_cast<std::int32_t>(::getpid());
  r.mode = static_cast<std::uint8_t>(req.mode);
  r.state.store(entered, std::memory_order_release);
  copy_string(ts.permit_id, kIdBytes, permit.id());
  ts.token.store(permit.fencing_token());
  ts.state.store(holding);

  const auto held_for =
      std::chrono::microseconds(rng() % static_cast<std::uint64_t>(cfg.hold_us + 1));
  if (req.units >= 2 && static_cast<int>(rng() % 100) < cfg.partial_percent) {
    // Half way through, give back some units (the permit's highest slots) and go on with the
    // rest.
    std::this_thread::sleep_for(held_for / 2);
    give_back(r, ps, permit, slots, 1 + static_cast<long long>(rng() % (req.units - 1)));
    std::this_thread::sleep_for(held_for - held_for / 2);
  } else if (held_for.count() > 0) {
    std::this_thread::sleep_for(held_for);
  }

  r.leave_ns = now_ns();
  r.lost = permit.lost() ? 1 : 0;
  r.deadline_ns = to_ns(permit.deadline());
  r.state.store(left, std::memory_order_release);
  ts.state.store(idle);
  try {
    (void)permit.release();
  } catch (const Error&) {
    ps.release_errors.fetch_add(1);
  }
  return true;
}

void worker_thread(SharedLog& log, ProcessSlot& ps, ThreadSlot& ts, FairSemaphore& sem,
                   std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const Config& cfg = log.config;
  while (log.stop.load() == 0) {
    Request req;
    const auto pick = rng() % 10;
    req.mode = pick < 4 ? Mode::acquire : pick < 7 ? Mode::try_acquire : Mode::try_acquire_for;
    req.timeout = milliseconds(rng() % static_cast<std::uint64_t>(cfg.max_timeout_ms + 1));
    req.units = cfg.weights[rng() % static_cast<std::uint64_t>(cfg.weight_count)];
    ts.state.store(waiting);
    req.wait_ns = now_ns();
    std::optional<Permit> permit;
    try {
      permit = ask(sem, req);
    } catch (const Error&) {
      // Redis restarting, a connection cut or blackholed, an eviction: count and go on.
      ps.acquire_errors.fetch_add(1);
      ts.state.store(idle);
      std::this_thread::sleep_for(milliseconds(10));
      continue;
    }
    if (!permit) {
      const std::int64_t end_ns = now_ns();
      ts.state.store(idle);
      if (req.mode == Mode::try_acquire) {
        ps.rejected.fetch_add(1);
      } else {
        ps.timed_out.fetch_add(1);
        if (!log_timeout(log, req, end_ns)) break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 500));
      continue;
    }
    if (!hold(log, ps, ts, *permit, req, rng)) break;
  }
  ts.state.store(idle);
}

int worker_main(int log_fd, int slot, const std::string& url) {
  // Never outlive the driver, however it ends.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() == 1) return 1;
  SharedMapping mapping(log_fd);
  SharedLog& log = mapping.log();
  ProcessSlot& ps = log.processes[slot];
  const Config& cfg = log.config;

  SemaphoreOptions options;
  options.limit = cfg.limit;
  options.lease = milliseconds(cfg.lease_ms);
  options.key_prefix = cfg.key_prefix;
  options.on_lost = [&ps](const std::string&, const std::string&) { ps.lost.fetch_add(1); };
  // Failed releases and renewals are expected under faults; on_lost and the counters say enough.
  options.logger = [](LogLevel, std::string_view) {};
  std::optional<FairSemaphore> sem;
  while (!sem && log.stop.load() == 0) {
    try {
      sem.emplace(worker_connection(url), cfg.name, options);
    } catch (const ConnectionError&) {
      std::this_thread::sleep_for(milliseconds(20));  // Redis is restarting
    } catch (const ReplyError&) {
      std::this_thread::sleep_for(milliseconds(20));  // e.g. LOADING after a restart
    }
  }
  std::vector<std::thread> threads;
  std::random_device rd;
  for (int t = 0; sem && t < cfg.threads; ++t) {
    const std::uint64_t seed = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    threads.emplace_back(worker_thread, std::ref(log), std::ref(ps), std::ref(ps.threads[t]),
                         std::ref(*sem), seed);
  }
  ps.ready.store(1);
  for (auto& t : threads) t.join();
  return 0;
}

// --- the driver -------------------------------------------------------------------------------

const std::vector<std::string> kFaultKinds = {"kill",         "stop",  "restart", "client-kill",
                                              "script-flush", "delay", "cut",     "blackhole"};

// Sanitizers slow every step several times over, and with it a client's notice of its grant.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr int kDefaultOrderSlackMs = 250;
#else
constexpr int kDefaultOrderSlackMs = 100;
#endif

struct Settings {
  int processes = 4;
  int threads = 4;
  long long limit = 4;
  /// Each request asks for one of these units, at random.
  std::vector<int> weights = {1, 2, 3};
  /// How many sections of 2 units or more give some back half way through.
  int partial_percent = 30;
  double seconds = 30;
  int lease_ms = 1000;
  int hold_us = 2000;
  /// try_acquire_for waits up to this: long enough past the order slack for the checker to
  /// see whether anyone passed a waiter that timed out.
  int max_timeout_ms = 400;
  std::string faults = "all";
  int fault_interval_ms = 800;
  std::uint64_t max_grants = 4'000'000;
  std::uint64_t grants = 0;  // end the load once this many were granted (0: run for --seconds)
  int order_slack_ms = kDefaultOrderSlackMs;
  std::uint64_t seed = 0;  // 0: random
};

struct Worker {
  pid_t pid = -1;
  bool stopped = false;
  bool via_proxy = false;
};

class Driver {
 public:
  explicit Driver(Settings s) : s_(std::move(s)) {
    if (s_.faults == "all") {
      enabled_ = kFaultKinds;
    } else if (s_.faults != "none") {
      std::stringstream in(s_.faults);
      for (std::string kind; std::getline(in, kind, ',');) {
        if (std::find(kFaultKinds.begin(), kFaultKinds.end(), kind) == kFaultKinds.end()) {
          throw CLI::ValidationError("--faults", "unknown fault '" + kind + "'");
        }
        enabled_.push_back(kind);
      }
    }
    if (s_.weights.empty() || s_.weights.size() > static_cast<std::size_t>(kMaxUnits)) {
      throw CLI::ValidationError("--weights", fmt::format("1 to {} weights", kMaxUnits));
    }
    for (const int w : s_.weights) {
      if (w > s_.limit) {
        throw CLI::ValidationError(
            "--weights", fmt::format("a weight of {} is more than the limit {}", w, s_.limit));
      }
    }
    if (s_.seed == 0) s_.seed = (static_cast<std::uint64_t>(std::random_device{}()) << 32) | 1;
    rng_.seed(s_.seed);
  }

  ~Driver() {
    server_.reset();
    if (!redis_dir_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(redis_dir_, ignored);
    }
  }
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  int run();

 private:
  bool enabled(const std::string& kind) const {
    return std::find(enabled_.begin(), enabled_.end(), kind) != enabled_.end();
  }
  bool uses_proxy() const { return enabled("delay") || enabled("cut") || enabled("blackhole"); }
  std::string direct_url() const { return server_->url(); }
  /// The server through the fault proxy, over TLS when the server speaks it (FAIRSEM_TEST_TLS).
  std::string proxied_url() const {
    ConnectionOptions c = server_->options();
    c.port = proxy_->port();
    return c.redacted_url();  // no password: the harness's servers need none
  }
  ConnectionOptions admin_connection() const {
    ConnectionOptions c = ConnectionOptions::from_url(direct_url());
    c.command_timeout = milliseconds(2000);
    c.reconnect_attempts = 3;
    c.reconnect_backoff_max = milliseconds(100);
    return c;
  }

  void spawn(int slot);
  void inject(const std::string& kind);
  void inject_once(const std::string& kind);
  void kill_worker();
  void stop_worker();
  void restart_redis();
  void raw_command(const std::string& kind, std::initializer_list<std::string_view> argv,
                   milliseconds disturbed_for);
  void wait_until_loaded();
  void track_reclaims();
  std::vector<int> running_slots() const;
  /// A window in which a fault may have delayed grants: of every worker, or (`proxied`) of
  /// those connected through the proxy.
  void disturb(std::int64_t from, std::int64_t to, bool proxied = false) {
    input_.disturbances.push_back({from, to, {}});
    if (proxied) proxy_windows_.push_back(input_.disturbances.size() - 1);
  }
  int finish();
  bool wait_for_workers(std::int64_t deadline_ns);
  std::size_t leaked_entries();
  std::vector<std::string> leftover_keys();
  CheckInput collect();
  void print_summary(const CheckInput& checked, const CheckResult& result, std::size_t leaked,
                     const std::vector<std::string>& keys);

  Settings s_;
  std::vector<std::string> enabled_;
  std::mt19937_64 rng_;
  std::string redis_dir_;
  std::unique_ptr<test::RedisServer> server_;
  std::unique_ptr<FaultProxy> proxy_;
  std::unique_ptr<SharedMapping> shm_;
  std::string name_ = "stress";
  std::string prefix_;
  std::vector<Worker> workers_;
  std::map<std::string, int> injected_;
  int stop_misses_ = 0;
  int worker_failures_ = 0;
  std::vector<std::string> failures_;
  CheckInput input_;
  // Permits held by a SIGKILLed worker, until Redis no longer lists them.
  struct Reclaim {
    std::int64_t kill_ns = 0;
    bool deadline_seen = false;
  };
  std::map<std::string, Reclaim> reclaiming_;
  std::int64_t longest_reclaim_ns_ = 0;  // kill -> first status that no longer lists it
  /// kill -> the permit's lease deadline in Redis, the latest among the killed permits: when
  /// Redis hands it on (bounded above by the status reply's arrival + its lease_left).
  std::int64_t latest_deadline_ns_ = 0;
  std::size_t reclaims_ = 0;
  std::size_t expiring_ = 0;                // receipts and wake lists left with a TTL
  std::vector<std::size_t> proxy_windows_;  // indexes into input_.disturbances
  std::vector<int> proxied_pids_;  // every worker that ever used the proxy  // release receipts
                                   // still expiring at the end
  std::optional<SemaphoreAdmin> admin_;
  std::optional<detail::Connection> raw_;
  std::vector<std::string> bag_;  // fault kinds still to inject in this round
  struct PendingCont {
    int slot;
    std::int64_t stop_ns;
    std::int64_t until_ns;
  };
  std::vector<PendingCont> pending_conts_;
  std::int64_t delay_ends_ns_ = 0;
  std::int64_t longest_restart_ns_ = 0;  // SIGKILL of redis-server until it answers again
};

void Driver::spawn(int slot) {
  Worker& w = workers_[slot];
  const std::string url = w.via_proxy ? proxied_url() : direct_url();
  std::vector<std::string> args = {"fairsem_stress", "--worker", std::to_string(shm_->fd()),
                                   std::to_string(slot), url};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  shm_->log().processes[slot].ready.store(0);
  for (ThreadSlot& t : shm_->log().processes[slot].threads) t.state.store(idle);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ);
  if (rc != 0) throw std::system_error(rc, std::generic_category(), "posix_spawn worker");
  w.pid = pid;
  w.stopped = false;
  if (w.via_proxy) proxied_pids_.push_back(pid);
  shm_->log().processes[slot].pid.store(pid);
}

std::vector<int> Driver::running_slots() const {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(workers_.size()); ++i) {
    if (workers_[i].pid > 0 && !workers_[i].stopped && shm_->log().processes[i].ready.load() != 0) {
      out.push_back(i);
    }
  }
  return out;
}

void Driver::kill_worker() {
  auto slots = running_slots();
  if (slots.empty()) return;
  // Every other kill aims at a process with a thread inside (if one is), so that holders die
  // as well as waiters.
  if (injected_["kill"] % 2 == 1) {
    std::vector<int> holding_slots;
    for (int slot : slots) {
      for (int t = 0; t < s_.threads; ++t) {
        if (shm_->log().processes[slot].threads[t].state.load() == holding) {
          holding_slots.push_back(slot);
          break;
        }
      }
    }
    if (!holding_slots.empty()) slots = holding_slots;
  }
  const int slot = slots[rng_() % slots.size()];
  Worker& w = workers_[slot];
  ::kill(w.pid, SIGKILL);
  const std::int64_t at = now_ns();
  int status = 0;
  ::waitpid(w.pid, &status, 0);
  input_.kills.push_back({w.pid, at});
  // Dead, its slots no longer change: the permits it held must come back within a lease.
  for (int t = 0; t < s_.threads; ++t) {
    ThreadSlot& ts = shm_->log().processes[slot].threads[t];
    if (ts.state.load() == holding) reclaiming_.emplace(ts.permit_id, Reclaim{at, false});
  }
  ++injected_["kill"];
  spawn(slot);
}

bool process_is_stopped(pid_t pid) {
  for (int i = 0; i < 1000; ++i) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(in, line);
    const auto paren = line.rfind(')');
    if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'T') {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return false;
}

void Driver::stop_worker() {
  // Freeze a worker while one of its threads is inside; a freeze that finds nobody inside is
  // undone at once and tried again (up to 50 times).
  for (int attempt = 0; attempt < 50; ++attempt) {
    const auto slots = running_slots();
    if (slots.empty()) return;
    const int slot = slots[rng_() % slots.size()];
    Worker& w = workers_[slot];
    ::kill(w.pid, SIGSTOP);
    const std::int64_t stop_ns = now_ns();
    const bool frozen = process_is_stopped(w.pid);
    bool inside = false;
    for (int t = 0; frozen && t < s_.threads; ++t) {
      inside = inside || shm_->log().processes[slot].threads[t].state.load() == holding;
    }
    if (!inside) {
      // The thaw time is taken before SIGCONT: the worker may leave the instant it wakes.
      input_.stops.push_back({w.pid, stop_ns, now_ns()});
      ::kill(w.pid, SIGCONT);
      ++stop_misses_;
      continue;
    }
    // Longer than a lease and a renewal interval: its permit must pass on meanwhile.
    w.stopped = true;
    const auto frozen_for = milliseconds(s_.lease_ms + s_.lease_ms / 3 + 300);
    const std::int64_t until = stop_ns + ms_to_ns(frozen_for.count());
    pending_conts_.push_back({slot, stop_ns, until});
    ++injected_["stop"];
    return;
  }
}

void Driver::restart_redis() {
  const std::int64_t down = now_ns();
  server_->kill();  // SIGKILL: only what appendfsync always wrote survives
  server_->start();
  wait_until_loaded();
  const std::int64_t up = now_ns();
  longest_restart_ns_ = std::max(longest_restart_ns_, up - down);
  disturb(down, up + ms_to_ns(1000));
  ++injected_["restart"];
}

/// `disturbed_for`: how long the fault may delay a grant's arrival (reconnects, reloads).
void Driver::raw_command(const std::string& kind, std::initializer_list<std::string_view> argv,
                         milliseconds disturbed_for) {
  // Retried: after a Redis restart the first command finds the old connection dead, and the
  // server answers LOADING until it has read its AOF back.
  const std::int64_t give_up = now_ns() + ms_to_ns(10'000);
  for (;;) {
    try {
      if (!raw_) raw_.emplace(admin_connection());
      (void)raw_->command(argv);
      const std::int64_t at = now_ns();
      disturb(at, at + ms_to_ns(disturbed_for.count()));
      ++injected_[kind];
      return;
    } catch (const Error& e) {
      if (now_ns() > give_up) {
        failures_.push_back(fmt::format("{} could not be injected: {}", kind, e.what()));
        return;
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
  }
}

/// Waits until the restarted server has loaded its AOF and answers commands.
void Driver::wait_until_loaded() {
  const std::int64_t give_up = now_ns() + ms_to_ns(60'000);
  for (;;) {
    try {
      if (!raw_) raw_.emplace(admin_connection());
      (void)raw_->command({"PING"});
      return;
    } catch (const Error& e) {
      if (now_ns() > give_up) throw;
      std::this_thread::sleep_for(milliseconds(10));
    }
  }
}

void Driver::inject(const std::string& kind) {
  try {
    inject_once(kind);
  } catch (const std::exception& e) {
    // Reported, and the run goes on: the checks still say whether the promises held.
    failures_.push_back(fmt::format("fault '{}' failed: {}", kind, e.what()));
  }
}

void Driver::inject_once(const std::string& kind) {
  const std::int64_t at = now_ns();
  if (kind == "kill") {
    kill_worker();
  } else if (kind == "stop") {
    stop_worker();
  } else if (kind == "restart") {
    restart_redis();
  } else if (kind == "client-kill") {
    raw_command(kind, {"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"}, milliseconds(500));
  } else if (kind == "script-flush") {
    raw_command(kind, {"SCRIPT", "FLUSH"}, milliseconds(200));
  } else if (kind == "delay") {
    const auto delay = milliseconds(20 + rng_() % 130);
    const auto duration = milliseconds(300 + rng_() % 700);
    proxy_->set_delay(delay);
    delay_ends_ns_ = at + ms_to_ns(duration.count());
    disturb(at, delay_ends_ns_ + ms_to_ns(delay.count() + 500), true);
    ++injected_[kind];
  } else if (kind == "cut") {
    proxy_->cut_next_reply();
    disturb(at, at + ms_to_ns(2000), true);
    ++injected_[kind];
  } else if (kind == "blackhole") {
    const auto duration = milliseconds(1200 + rng_() % 600);  // past the command timeout
    proxy_->blackhole(duration);
    disturb(at, at + ms_to_ns(duration.count() + 2500), true);
    ++injected_[kind];
  }
}

void Driver::track_reclaims() {
  if (reclaiming_.empty()) return;
  try {
    if (!admin_) admin_.emplace(admin_connection(), name_, prefix_);
    const Status st = admin_->status();
    const std::int64_t at = now_ns();
    for (auto it = reclaiming_.begin(); it != reclaiming_.end();) {
      const auto holder = std::find_if(st.holders.begin(), st.holders.end(),
                                       [&](const PermitInfo& p) { return p.id == it->first; });
      Reclaim& r = it->second;
      if (holder != st.holders.end()) {
        if (!r.deadline_seen) {
          r.deadline_seen = true;
          const std::int64_t deadline = at + ms_to_ns(holder->lease_left.count());
          latest_deadline_ns_ = std::max(latest_deadline_ns_, deadline - r.kill_ns);
        }
        ++it;
        continue;
      }
      longest_reclaim_ns_ = std::max(longest_reclaim_ns_, at - r.kill_ns);
      ++reclaims_;
      it = reclaiming_.erase(it);
    }
  } catch (const Error&) {
    // Redis is restarting: try again at the next tick.
  }
}

int Driver::run() {
  // The AOF lives on tmpfs: a SIGKILLed redis-server loses nothing it acknowledged either way
  // (appendfsync always writes the AOF before replying), and a disk's fsync latency would
  // throttle the load to a few hundred grants per second.
  char dir[] = "/dev/shm/fairsem-stress-redis-XXXXXX";
  if (::mkdtemp(dir) == nullptr) throw std::system_error(errno, std::generic_category(), "mkdtemp");
  redis_dir_ = dir;
  server_ = std::make_unique<test::RedisServer>(std::vector<std::string>{
      "--dir", redis_dir_, "--appendonly", "yes", "--appendfsync", "always"});
  if (uses_proxy()) proxy_ = std::make_unique<FaultProxy>(server_->port());
  const std::uint64_t capacity = std::max(s_.max_grants, s_.grants + s_.grants / 10);
  shm_ = std::make_unique<SharedMapping>(capacity);
  prefix_ = fmt::format("stress{}", ::getpid());
  Config& cfg = shm_->log().config;
  copy_string(cfg.url, sizeof cfg.url, direct_url());
  copy_string(cfg.name, sizeof cfg.name, name_);
  copy_string(cfg.key_prefix, sizeof cfg.key_prefix, prefix_);
  cfg.limit = s_.limit;
  cfg.lease_ms = s_.lease_ms;
  cfg.hold_us = s_.hold_us;
  cfg.max_timeout_ms = s_.max_timeout_ms;
  cfg.weight_count = static_cast<int>(s_.weights.size());
  std::copy(s_.weights.begin(), s_.weights.end(), cfg.weights);
  cfg.partial_percent = s_.partial_percent;
  cfg.threads = s_.threads;
  input_.limit = s_.limit;
  input_.lease_ns = ms_to_ns(s_.lease_ms);
  input_.order_slack_ns = ms_to_ns(s_.order_slack_ms);
  // A waker whose BRPOP failed during a freeze pauses 200 ms, then reconnects (connect timeout
  // 500 ms) before it listens again.
  input_.thaw_recovery_ns = ms_to_ns(1000);

  fmt::print(
      "fairsem_stress: {} processes x {} threads, limit {}, weights {}, lease {} ms, {} s, "
      "faults: {}, seed {}\n",
      s_.processes, s_.threads, s_.limit, fmt::join(s_.weights, ","), s_.lease_ms, s_.seconds,
      enabled_.empty() ? std::string("none") : fmt::format("{}", fmt::join(enabled_, ",")),
      s_.seed);
  std::fflush(stdout);

  workers_.resize(static_cast<std::size_t>(s_.processes));
  for (int i = 0; i < s_.processes; ++i) {
    workers_[i].via_proxy = proxy_ && i % 2 == 0;  // half through the proxy, half direct
    spawn(i);
  }
  const std::int64_t start = now_ns();
  const std::int64_t end = start + static_cast<std::int64_t>(s_.seconds * 1e9);
  std::int64_t next_fault = start + ms_to_ns(s_.fault_interval_ms);
  std::int64_t next_progress = start + ms_to_ns(10'000);
  while (now_ns() < end && shm_->log().full.load() == 0 &&
         (s_.grants == 0 || shm_->log().next_record.load() < s_.grants)) {
    std::this_thread::sleep_for(milliseconds(5));
    const std::int64_t now = now_ns();
    for (auto it = pending_conts_.begin(); it != pending_conts_.end();) {
      if (now < it->until_ns) {
        ++it;
        continue;
      }
      Worker& w = workers_[it->slot];
      input_.stops.push_back({w.pid, it->stop_ns, now_ns()});
      ::kill(w.pid, SIGCONT);
      w.stopped = false;
      it = pending_conts_.erase(it);
    }
    if (delay_ends_ns_ != 0 && now >= delay_ends_ns_) {
      proxy_->set_delay(milliseconds(0));
      delay_ends_ns_ = 0;
    }
    track_reclaims();
    // A worker that died by itself is a failure (a crash, a sanitizer report).
    for (auto& w : workers_) {
      int status = 0;
      if (w.pid > 0 && ::waitpid(w.pid, &status, WNOHANG) == w.pid) {
        failures_.push_back(fmt::format("worker {} exited early with status {:#x}", w.pid, status));
        ++worker_failures_;
        w.pid = -1;
      }
    }
    if (now >= next_progress) {
      fmt::print("[{:6.0f} s] {} grants and time-outs\n", static_cast<double>(now - start) / 1e9,
                 shm_->log().next_record.load());
      std::fflush(stdout);
      next_progress += ms_to_ns(10'000);
    }
    if (!enabled_.empty() && now >= next_fault) {
      // Every kind once per round, in a random order, so a short run injects each of them.
      if (bag_.empty()) {
        bag_ = enabled_;
        std::shuffle(bag_.begin(), bag_.end(), rng_);
      }
      const std::string kind = bag_.back();
      bag_.pop_back();
      // Not two network faults at once: a delay in progress would hide the next one.
      inject(kind);
      const auto interval = static_cast<std::uint64_t>(s_.fault_interval_ms);
      next_fault = now_ns() + ms_to_ns(static_cast<std::int64_t>(interval / 2 + rng_() % interval));
    }
  }
  return finish();
}

bool Driver::wait_for_workers(std::int64_t deadline_ns) {
  bool all = true;
  for (auto& w : workers_) {
    if (w.pid <= 0) continue;
    int status = 0;
    pid_t r = 0;
    while ((r = ::waitpid(w.pid, &status, WNOHANG)) == 0 && now_ns() < deadline_ns) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    if (r == 0) {
      ::kill(w.pid, SIGKILL);
      ::waitpid(w.pid, &status, 0);
      failures_.push_back(fmt::format("worker {} did not stop in time; killed", w.pid));
      ++worker_failures_;
      all = false;
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failures_.push_back(fmt::format("worker {} ended with status {:#x}", w.pid, status));
      ++worker_failures_;
      all = false;
    }
    w.pid = -1;
  }
  return all;
}

std::size_t Driver::leaked_entries() {
  // Killed workers' entries expire with their lease; the status call reaps them.
  const std::int64_t deadline = now_ns() + ms_to_ns(3 * s_.lease_ms + 5000);
  std::size_t left = 0;
  do {
    try {
      if (!admin_) admin_.emplace(admin_connection(), name_, prefix_);
      const Status st = admin_->status();
      left = st.holders.size() + st.waiters.size();
      if (left == 0) return 0;
    } catch (const Error& e) {
      fmt::print(stderr, "fairsem_stress: status failed: {}\n", e.what());
    }
    std::this_thread::sleep_for(milliseconds(50));
  } while (now_ns() < deadline);
  return left;
}

std::vector<std::string> Driver::leftover_keys() {
  // Only the counter and the stored limit outlive the permits, and keys on their way out (a
  // TTL): release receipts, and wake lists of waiters promoted after they died. A wake list's TTL
  // is the lease of the call that promoted, and the admin's status calls (leaked_entries) promote
  // with SemaphoreAdmin's lease (10 s), longer than this loop waits.
  const std::string base = prefix_ + ":{" + name_ + "}:";
  const std::set<std::string> allowed = {base + "counter", base + "meta"};
  const std::string receipts = base + "released:";
  const std::string wake_lists = base + "wake:";
  const std::int64_t deadline = now_ns() + ms_to_ns(3 * s_.lease_ms + 5000);
  std::vector<std::string> extra;
  do {
    extra.clear();
    expiring_ = 0;
    try {
      if (!raw_) raw_.emplace(admin_connection());
      std::string cursor = "0";
      do {
        const auto reply =
            raw_->command({"SCAN", cursor, "MATCH", prefix_ + ":*", "COUNT", "1000"});
        cursor = reply.elements.at(0).str;
        for (const auto& k : reply.elements.at(1).elements) {
          if (allowed.count(k.str) != 0) continue;
          if (k.str.rfind(receipts, 0) == 0 || k.str.rfind(wake_lists, 0) == 0) {
            // -2: it expired between SCAN and PTTL; > 0: on its way out; -1 would be a leak.
            const long long ttl = raw_->command({"PTTL", k.str}).integer;
            if (ttl == -2) continue;
            if (ttl > 0) {
              ++expiring_;
              continue;
            }
          }
          extra.push_back(k.str);
        }
      } while (cursor != "0");
      if (extra.empty()) return extra;
    } catch (const Error& e) {
      fmt::print(stderr, "fairsem_stress: SCAN failed: {}\n", e.what());
    }
    std::this_thread::sleep_for(milliseconds(100));
  } while (now_ns() < deadline);
  if (extra.size() > 20) extra.resize(20);  // enough to tell what leaks
  for (std::string& key : extra) {
    try {
      const auto ttl = raw_->command({"PTTL", key}).integer;
      const auto type = raw_->command({"TYPE", key}).str;
      std::string items;
      if (type == "list") {
        for (const auto& e : raw_->command({"LRANGE", key, "0", "9"}).elements)
          items += " " + e.str;
      }
      key += fmt::format(" ({}, ttl {} ms:{})", type, ttl, items);
    } catch (const Error&) {
    }
  }
  return extra;
}

CheckInput Driver::collect() {
  CheckInput in = input_;
  for (std::size_t i : proxy_windows_) in.disturbances[i].pids = proxied_pids_;
  SharedLog& log = shm_->log();
  const std::uint64_t n = std::min(log.next_record.load(), log.capacity);
  in.sections.reserve(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    Record& r = log.record(i);
    const auto state = r.state.load(std::memory_order_acquire);
    if (state == empty) continue;  // reserved by a worker killed before it wrote the record
    if (state == timed_out) {
      in.timeouts.push_back({r.units, r.wait_ns, r.deadline_ns, r.enter_ns, r.pid});
      continue;
    }
    Section s;
    s.token = r.token;
    s.units = r.units;
    // More slots than the log keeps can only be more than the units: the checker sees a
    // slot set that does not match, as it should.
    const auto kept_slots = [](const std::int64_t* slots, std::int32_t count) {
      return std::vector<std::int64_t>(slots, slots + std::clamp(count, 0, kMaxUnits));
    };
    s.slots = kept_slots(r.slots, r.slot_count);
    if (r.slot_count > kMaxUnits) s.slots.push_back(-1);
    s.wait_ns = r.wait_ns;
    s.enter_ns = r.enter_ns;
    s.deadline_ns = r.deadline_ns;
    s.partial_ns = r.partial_ns;
    if (s.partial_ns != 0) {
      s.kept = kept_slots(r.kept, r.kept_count);
      s.partial_failed = r.partial_failed != 0;
    }
    s.pid = r.pid;
    s.mode = static_cast<Mode>(r.mode);
    s.left = state == left;
    s.leave_ns = s.left ? r.leave_ns : 0;
    s.lost = r.lost != 0;
    in.sections.push_back(s);
  }
  return in;
}

int Driver::finish() {
  // Thaw and heal everything, then let the workers finish their current step.
  for (const auto& p : pending_conts_) {
    // A freeze runs its full length, so that it proves what it is for.
    while (now_ns() < p.until_ns) std::this_thread::sleep_for(milliseconds(5));
    input_.stops.push_back({workers_[p.slot].pid, p.stop_ns, now_ns()});
    ::kill(workers_[p.slot].pid, SIGCONT);
    workers_[p.slot].stopped = false;
  }
  pending_conts_.clear();
  if (proxy_) proxy_->set_delay(milliseconds(0));
  shm_->log().stop.store(1);
  wait_for_workers(now_ns() + ms_to_ns(30'000 + 5 * s_.lease_ms));
  // Permits of the last killed workers come back too.
  const std::int64_t reclaim_deadline = now_ns() + ms_to_ns(2 * s_.lease_ms + 2000);
  while (!reclaiming_.empty() && now_ns() < reclaim_deadline) {
    track_reclaims();
    std::this_thread::sleep_for(milliseconds(5));
  }
  const std::size_t leaked = leaked_entries() + reclaiming_.size();
  const auto keys = leftover_keys();
  const CheckInput checked = collect();
  const CheckResult result = check(checked);

  for (const auto& f : result.failures) failures_.push_back(f);
  if (leaked > 0) failures_.push_back(fmt::format("{} permits or waiters left in Redis", leaked));
  if (!keys.empty()) {
    failures_.push_back(fmt::format("keys left in Redis: {}", fmt::join(keys, ", ")));
  }
  // Redis hands a killed holder's permit on at its lease deadline, at most one lease after the
  // kill (its last renewal came before it); the bound allows for the status round trip.
  if (latest_deadline_ns_ > ms_to_ns(s_.lease_ms + 100)) {
    failures_.push_back(fmt::format(
        "a killed holder's permit stayed leased until {:.0f} ms after the kill (lease {} ms)",
        static_cast<double>(latest_deadline_ns_) / 1e6, s_.lease_ms));
  }
  for (const auto& kind : enabled_) {
    if (injected_[kind] == 0) failures_.push_back("fault '" + kind + "' was never injected");
  }
  if (enabled("stop") && result.stopped_holders == 0) {
    failures_.push_back("no SIGSTOP caught a holder inside its critical section");
  }
  if (result.grants == 0) failures_.push_back("no permit was granted");
  print_summary(checked, result, leaked, keys);
  return failures_.empty() ? 0 : 1;
}

void Driver::print_summary(const CheckInput& checked, const CheckResult& r, std::size_t leaked,
                           const std::vector<std::string>& keys) {
  std::uint64_t acquire_errors = 0, release_errors = 0, rejected = 0, timed_out = 0, lost = 0;
  for (const ProcessSlot& ps : shm_->log().processes) {
    acquire_errors += ps.acquire_errors.load();
    release_errors += ps.release_errors.load();
    rejected += ps.rejected.load();
    timed_out += ps.timed_out.load();
    lost += ps.lost.load();
  }
  const auto ms = [](std::int64_t ns) { return static_cast<double>(ns) / 1e6; };
  std::map<long long, std::size_t> by_units;
  for (const Section& section : checked.sections) ++by_units[section.units];
  std::vector<std::string> units_counts;
  units_counts.reserve(by_units.size());
  for (const auto& [units, count] : by_units)
    units_counts.push_back(fmt::format("{}: {}", units, count));
  fmt::print("\n{:<44} {} (by units {})\n", "grants", r.grants, fmt::join(units_counts, ", "));
  fmt::print("{:<44} {} ({} failed; {} kept other than the lowest slots)\n", "partial releases",
             r.partial_releases, r.partial_releases_failed, r.partial_wrong_slots);
  fmt::print("{:<44} {} in {} permits (limit {}; over the limit {} times)\n",
             "max units held by valid permits at once", r.max_units, r.max_units_holders, s_.limit,
             r.over_limit_instants);
  fmt::print("{:<44} {}\n", "tokens granted twice", r.duplicate_tokens);
  fmt::print("{:<44} {} of {} (out of range {}, permits' slot sets wrong {})\n",
             "slot holdings shared by valid permits", r.shared_slots, r.slot_holdings,
             r.slots_out_of_range, r.bad_slot_sets);
  fmt::print("{:<44} {}\n", "slot holders whose token did not increase",
             r.slot_tokens_not_increasing);
  fmt::print("{:<44} {} of {} checked ({} passed a request for more units)\n",
             "FIFO violations (blocking waiters)", r.fifo_violations, r.fifo_checked,
             r.fifo_violations_past_heavier);
  fmt::print("{:<44} {} of {} checked\n", "timed-out waiters passed by a later request",
             r.timeouts_overtaken, r.timeouts_checked);
  fmt::print("{:<44} {} of {} checked\n", "token order violations (all grants)",
             r.token_order_violations, r.token_order_checked);
  fmt::print("{:<44} {:.1f} ms (slack {:.0f} ms; {} over 10 ms)\n",
             "worst order inversion observed", ms(r.worst_inversion_ns), ms(input_.order_slack_ns),
             r.inversions_over_10ms);
  fmt::print("{:<44} {}\n", "leaked permits (after every worker stopped)", leaked);
  fmt::print("{:<44} {} (and {} receipts and wake lists expiring)\n",
             "keys left besides counter and meta", keys.size(), expiring_);
  fmt::print("{:<44} {:.0f} ms over {} permits (lease {} ms; Redis lease deadline {:.0f} ms)\n",
             "longest reclaim of a killed holder's permit", ms(longest_reclaim_ns_), reclaims_,
             s_.lease_ms, ms(latest_deadline_ns_));
  fmt::print("{:<44} {} ({} saw lost(), {} passed on; {} later grants with an older token)\n",
             "holders frozen past their lease", r.stopped_holders,
             r.stopped_holders - r.stopped_holders_not_lost, r.stopped_holders_passed_on,
             r.stopped_holders_token_not_older);
  fmt::print("{:<44} rejected {}, timed out {}, errors {}, release errors {}, lost {}\n",
             "other outcomes", rejected, timed_out, acquire_errors, release_errors, lost);
  fmt::print("{:<44} {:.0f} ms\n", "longest Redis restart (SIGKILL to answering)",
             ms(longest_restart_ns_));
  fmt::print("faults injected:");
  for (const auto& kind : kFaultKinds) {
    if (enabled(kind)) fmt::print(" {} {}", kind, injected_[kind]);
  }
  if (proxy_) {
    fmt::print(" (proxy: {} cuts, {} connections blackholed)", proxy_->cuts(),
               proxy_->blackholed());
  }
  fmt::print("\n");
  if (failures_.empty()) {
    fmt::print("RESULT: ok\n");
  } else {
    for (const auto& f : failures_) fmt::print("FAILED: {}\n", f);
    for (const auto& d : r.details) fmt::print("{}\n", d);
  }
}

}  // namespace
}  // namespace fairsem::stress

int main(int argc, char** argv) {
  using namespace fairsem::stress;
  if (argc == 5 && std::string(argv[1]) == "--worker") {
    try {
      return worker_main(std::stoi(argv[2]), std::stoi(argv[3]), argv[4]);
    } catch (const std::exception& e) {
      fmt::print(stderr, "fairsem_stress worker: {}\n", e.what());
      return 1;
    }
  }
  Settings s;
  CLI::App app{
      "fairsem_stress: a randomized stress and fault-injection run, checked by an "
      "independent observer"};
  app.add_option("--processes", s.processes, "worker processes")
      ->check(CLI::Range(1, kMaxProcesses));
  app.add_option("--threads", s.threads, "threads per worker")->check(CLI::Range(1, kMaxThreads));
  app.add_option("--limit", s.limit, "units")->check(CLI::Range(1LL, 1000LL));
  app.add_option("--weights", s.weights,
                 "the units a request asks for: one of these at random, each at most the limit")
      ->delimiter(',')
      ->check(CLI::Range(1, kMaxUnits));
  app.add_option("--partial-percent", s.partial_percent,
                 "sections of 2 units or more that give some back half way through")
      ->check(CLI::Range(0, 100));
  app.add_option("--seconds", s.seconds, "length of the load")->check(CLI::Range(1.0, 86400.0));
  app.add_option("--lease-ms", s.lease_ms, "lease")->check(CLI::Range(100, 60000));
  app.add_option("--hold-us", s.hold_us, "longest critical section")->check(CLI::Range(0, 1000000));
  app.add_option("--max-timeout-ms", s.max_timeout_ms, "longest try_acquire_for timeout")
      ->check(CLI::Range(0, 60000));
  app.add_option("--faults", s.faults,
                 "all, none, or a comma list of: kill,stop,restart,client-kill,script-flush,"
                 "delay,cut,blackhole");
  app.add_option("--fault-interval-ms", s.fault_interval_ms, "mean time between faults")
      ->check(CLI::Range(50, 600000));
  app.add_option("--grants", s.grants, "end the load after this many grants (within --seconds)");
  app.add_option("--max-grants", s.max_grants, "size of the observer's log")
      ->check(CLI::Range(std::uint64_t{1000}, std::uint64_t{100'000'000}));
  app.add_option("--order-slack-ms", s.order_slack_ms,
                 "how much later than a higher token a lower one may enter")
      ->check(CLI::Range(0, 60000));
  app.add_option("--seed", s.seed, "random seed (0: random)");
  CLI11_PARSE(app, argc, argv);
  try {
    Driver driver(s);
    return driver.run();
  } catch (const CLI::Error& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    fmt::print(stderr, "fairsem_stress: {}\n", e.what());
    return 1;
  }
}
