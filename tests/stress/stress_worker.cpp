// The stress harness's worker process: its threads loop acquire -> critical section ->
// release, logging every critical section and every timed wait that gave up to the shared log.

#include "stress_worker.hpp"

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "checker.hpp"
#include "exception_is.hpp"
#include "fairsem/fairsem.hpp"
#include "shared_log.hpp"
#include "worker_tenants.hpp"

namespace fairsem::stress {

std::map<int, std::int64_t> cpu_waits() {
  std::map<int, std::int64_t> waits;
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return waits;
  while (const dirent* entry = ::readdir(dir)) {
    const int tid = std::atoi(entry->d_name);
    if (tid <= 0) continue;
    const std::string path = "/proc/self/task/" + std::string(entry->d_name) + "/schedstat";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // the thread ended meanwhile
    char text[96] = {};
    const ssize_t n = ::read(fd, text, sizeof text - 1);
    ::close(fd);
    unsigned long long running = 0, waiting = 0;
    if (n > 0 && std::sscanf(text, "%llu %llu", &running, &waiting) == 2) {
      waits[tid] = static_cast<std::int64_t>(waiting);
    }
  }
  ::closedir(dir);
  return waits;
}

std::int64_t longest_cpu_wait(const std::map<int, std::int64_t>& before,
                              const std::map<int, std::int64_t>& after, const std::set<int>& skip) {
  if (before.empty() || after.empty()) return -1;
  std::int64_t longest = 0;
  for (const auto& [tid, wait] : after) {
    const auto then = before.find(tid);
    if (then != before.end() && skip.count(tid) == 0) {
      longest = std::max(longest, wait - then->second);
    }
  }
  return longest;
}

namespace {

// --- the worker -------------------------------------------------------------------------------

ConnectionOptions worker_connection(const std::string& url) {
  ConnectionOptions c = ConnectionOptions::from_url(url);
  c.connect_timeout = milliseconds(500);
  c.command_timeout = milliseconds(1000);
  c.reconnect_attempts = 10;
  c.reconnect_backoff_min = milliseconds(10);
  c.reconnect_backoff_max = milliseconds(200);
  // CLIENT LIST then tells the renewal connections from the others (the renew-kill fault).
  c.client_name = "fairsem-stress-" + std::to_string(::getpid());
  return c;
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
  r.partial_done_ns = now_ns();
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
  milliseconds timeout{0};  // try_acquire_for, try_acquire_for_async, callback
  /// callback: cancel() if no outcome came within this (0: never).
  milliseconds cancel_after{0};
  std::int64_t wait_ns = 0;
  std::map<int, std::int64_t> cpu_waits;  // the process's threads' when it asked (cpu_waits())
  bool cancelled = false;                 // cancel() returned true: the callback got CancelledError
};

// This process's worker threads: one's wait for a CPU says nothing of another's grant, which
// only the asking thread and the library's (the waker, the executor's) bring.
std::mutex worker_tids_mu;
std::set<int> worker_tids;

/// The worker threads but the calling one.
std::set<int> other_workers() {
  std::lock_guard<std::mutex> lock(worker_tids_mu);
  std::set<int> others = worker_tids;
  others.erase(static_cast<int>(::gettid()));
  return others;
}

// This process's callbacks: requests made, and calls (all of them, a second one included).
std::atomic<std::uint64_t> callbacks_asked{0};
std::atomic<std::uint64_t> callbacks_called{0};

/// What an asynchronous request's callback was called with, and how often.
struct Outcome {
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  std::exception_ptr error;
  std::optional<Permit> permit;
};

/// acquire_async_until with a callback; cancelled after req.cancel_after without an outcome.
/// cancel() returning true promises the callback CancelledError, whatever raced it.
std::optional<Permit> ask_with_callback(FairSemaphore& sem, Request& req, ProcessSlot& ps) {
  auto out = std::make_shared<Outcome>();
  ps.callback_requests.fetch_add(1);
  callbacks_asked.fetch_add(1);
  AcquireRequest request =
      sem.acquire_async_until(req.units, Clock::now() + req.timeout,
                              [out](std::exception_ptr error, std::optional<Permit> permit) {
                                callbacks_called.fetch_add(1);
                                {
                                  std::lock_guard<std::mutex> lock(out->mu);
                                  if (++out->calls == 1) {
                                    out->error = std::move(error);
                                    out->permit = std::move(permit);
                                  }
                                }
                                out->cv.notify_all();
                              });
  std::unique_lock<std::mutex> lock(out->mu);
  if (req.cancel_after.count() > 0 &&
      !out->cv.wait_for(lock, req.cancel_after, [&] { return out->calls > 0; })) {
    lock.unlock();
    req.cancelled = request.cancel();
    lock.lock();
  }
  out->cv.wait(lock, [&] { return out->calls > 0; });
  if (req.cancelled) {
    ps.cancelled.fetch_add(1);
    if (!test::exception_is<CancelledError>(out->error) || out->permit)
      ps.cancels_broken.fetch_add(1);
    return std::nullopt;
  }
  if (out->error) std::rethrow_exception(out->error);
  return std::move(out->permit);
}

std::optional<Permit> ask(FairSemaphore& sem, Request& req, ProcessSlot& ps) {
  switch (req.mode) {
    case Mode::try_acquire:
      return sem.try_acquire(req.units);
    case Mode::try_acquire_for:
      return sem.try_acquire_for(req.units, req.timeout);
    case Mode::acquire_async:
      return sem.acquire_async(req.units).get();
    case Mode::try_acquire_for_async:
      return sem.try_acquire_for_async(req.units, req.timeout).get();
    case Mode::callback:
      return ask_with_callback(sem, req, ps);
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

/// Logs a request that left the queue without a permit or a time-out: cancelled, or ended by an
/// error. Ahead of later waiters while it was queued. False when the log is full.
bool log_withdrawal(SharedLog& log, const Request& req, std::int64_t end_ns, bool error) {
  Record* r = next_record(log);
  if (r == nullptr) return false;
  r->units = static_cast<std::int32_t>(req.units);
  r->wait_ns = req.wait_ns;
  r->enter_ns = end_ns;
  r->pid = static_cast<std::int32_t>(::getpid());
  r->mode = static_cast<std::uint8_t>(req.mode);
  r->errored = error ? 1 : 0;
  r->state.store(withdrawn, std::memory_order_release);
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
  r.granted_deadline_ns = r.deadline_ns;
  // At most the acquire's own time: each wait was counted from its start.
  const std::int64_t cpu_wait = longest_cpu_wait(req.cpu_waits, cpu_waits(), other_workers());
  r.cpu_wait_ns = std::min(cpu_wait, r.enter_ns - r.wait_ns);
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
    r.release_ns = now_ns();
  } catch (const Error&) {
    ps.release_errors.fetch_add(1);
  }
  return true;
}

void worker_thread(SharedLog& log, ProcessSlot& ps, ThreadSlot& ts, TenantHandles& sem,
                   std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const Config& cfg = log.config;
  {
    std::lock_guard<std::mutex> lock(worker_tids_mu);
    worker_tids.insert(static_cast<int>(::gettid()));
  }
  while (log.stop.load() == 0) {
    Request req;
    // Blocking and asynchronous requests side by side, as services mix them.
    static constexpr Mode kModes[] = {
        Mode::acquire,         Mode::acquire,       Mode::try_acquire,
        Mode::try_acquire,     Mode::try_acquire,   Mode::try_acquire_for,
        Mode::try_acquire_for, Mode::acquire_async, Mode::try_acquire_for_async,
        Mode::callback};
    req.mode = kModes[rng() % std::size(kModes)];
    req.timeout = milliseconds(rng() % static_cast<std::uint64_t>(cfg.max_timeout_ms + 1));
    // Half the callbacks are cancelled if nothing came by a random moment of their wait.
    if (req.mode == Mode::callback && rng() % 2 == 0) {
      req.cancel_after =
          milliseconds(1 + rng() % static_cast<std::uint64_t>(cfg.max_timeout_ms + 1));
    }
    req.units = cfg.weights[rng() % static_cast<std::uint64_t>(cfg.weight_count)];
    ts.state.store(waiting);
    // The threads that bring a grant (this one, the waker, the executor's) may wait for a CPU
    // on a loaded machine: the checker does not count that against the library. (A try never
    // waits for a grant.)
    if (req.mode != Mode::try_acquire) req.cpu_waits = cpu_waits();
    req.wait_ns = now_ns();
    std::optional<Permit> permit;
    try {
      permit = ask(sem.for_request(log, ps, ts), req, ps);
    } catch (const Error&) {
      // Redis restarting, a connection cut or blackholed, an eviction: count and go on.
      ps.acquire_errors.fetch_add(1);
      ts.state.store(idle);
      if (!log_withdrawal(log, req, now_ns(), true)) break;
      std::this_thread::sleep_for(milliseconds(10));
      continue;
    }
    if (!permit) {
      const std::int64_t end_ns = now_ns();
      ts.state.store(idle);
      if (req.cancelled) {
        // Taken back: it may have been promoted at that instant and handed on, so it is no
        // timed-out waiter that nobody could pass.
        if (!log_withdrawal(log, req, end_ns, false)) break;
        continue;
      }
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

}  // namespace

int worker_main(int log_fd, int slot, const std::string& url) {
  // Never outlive the driver, however it ends.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() == 1) return 1;
  SharedMapping mapping(log_fd);
  SharedLog& log = mapping.log();
  ProcessSlot& ps = log.processes[slot];
  const Config& cfg = log.config;
  if (slot < cfg.previous_processes) {
    previous_worker(log, slot, worker_connection(url));
    return 0;
  }

  SemaphoreOptions options;
  options.limit = cfg.limit;
  options.lease = milliseconds(cfg.lease_ms);
  options.key_prefix = cfg.key_prefix;
  if (cfg.min_replicas > 0) {
    options.min_replicas = cfg.min_replicas;
    options.replica_timeout = milliseconds(cfg.replica_timeout_ms);
  }
  options.on_lost = [&ps](const std::string&, const std::string&) { ps.lost.fetch_add(1); };
  // Failed releases and renewals are expected under faults; on_lost and the counters say enough.
  options.logger = [](LogLevel, std::string_view) {};
  ClientOptions client_options;
  client_options.batch_calls = slot >= cfg.batched_from;
  std::optional<Client> client;
  std::optional<TenantHandles> sem;
  while (!sem && log.stop.load() == 0) {
    try {
      if (!client) client.emplace(worker_connection(url), client_options);
      sem.emplace(*client, cfg, options);
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
  // The destructor waits for every callback: each request's was called exactly once by now.
  sem.reset();
  const std::uint64_t asked = callbacks_asked.load();
  const std::uint64_t called = callbacks_called.load();
  if (asked != called)
    ps.callbacks_broken.fetch_add(asked > called ? asked - called : called - asked);
  return 0;
}

}  // namespace fairsem::stress
