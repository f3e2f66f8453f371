// Target 4: does Redis pay more per call as the queue grows? One semaphore with limit 1, one
// holder and N queued waiters (N = 10, 1,000, 10,000, 100,000). Each iteration is the hot path
// of a busy semaphore: a newcomer queues at the tail (acquire), then the holder releases and its
// release promotes the head of the queue (and wakes it, through its Client's inbox). The queue
// keeps its length. Each iteration alternates with one on a control: the same hot path with 10
// waiters on a second private server, so that pair_vs_control compares N waiters with 10 in the
// same seconds of a shared machine.
//
// And does Redis pay more per call as a semaphore's history grows? BM_PairAfterGrants: one
// semaphore, limit 1, nobody waiting; an uncontended pair (acquire, release) timed after 0,
// 1,000,000 and 10,000,000 earlier pairs on it (cumulative; pipelined in chunks of 1,000, as
// fast as Redis takes them). Every release leaves a receipt that lives 60 s (in the semaphore's
// receipts buckets), so they hold the last minute's receipts, as a busy semaphore's do; the
// last case waits until they have all expired.
//
// Per-call server time comes from SLOWLOG with a threshold of 0 µs: Redis records the execution
// time of every call, so acquire and release are told apart (commandstats sums both under
// FCALL, or EVALSHA). Memory per queued waiter is used_memory after queueing N waiters, minus
// before, / N.
//
// Each case times a fixed count of pairs, 20,000, or FAIRSEM_BENCH_FIXED_ITERATIONS (CI's smoke
// run sets a few hundred: it proves the program runs, it measures nothing).

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "fairsem/impl/protocol/replies.hpp"

namespace fairsem::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kLease = "3600000";  // nobody expires during a run
constexpr const char* kLimit = "1";

/// The pairs each case times: FAIRSEM_BENCH_FIXED_ITERATIONS (a positive count), or 20,000.
benchmark::IterationCount fixed_iterations() {
  const char* text = std::getenv("FAIRSEM_BENCH_FIXED_ITERATIONS");
  if (text == nullptr || *text == '\0') return 20'000;
  char* end = nullptr;
  const long long n = std::strtoll(text, &end, 10);
  if (*end != '\0' || n <= 0) {
    std::fprintf(stderr, "FAIRSEM_BENCH_FIXED_ITERATIONS must be a positive count, not '%s'\n",
                 text);
    std::exit(2);
  }
  return n;
}

/// The semaphore script's keys for NAME under the prefix "bench" (as FairSemaphore builds them).
std::vector<std::string> script_keys(const std::string& name) {
  return fairsem::detail::semaphore_keys("bench", name);
}

struct Queue {
  explicit Queue(std::string semaphore_name)
      : name(std::move(semaphore_name)), keys(script_keys(name)) {
    for (const std::string& k : keys) key_args.push_back(k);
  }

  std::string name;
  std::vector<std::string> keys;
  detail::Args key_args;
  long long next = 0;
  std::deque<std::pair<std::string, long long>> members;  // id, ticket, in ticket order

  std::vector<std::string> acquire_args(const std::string& id) {
    // As the library queues: no ticket yet, one unit, woken through its Client's inbox.
    return {"acquire", kLimit, kLease, id, "queue", "bench", "0", "1", "bench-client"};
  }
  std::string new_id() { return fmt::format("w{}", next++); }
};

long long used_memory(detail::Connection& conn) {
  const std::string info = conn.command({"INFO", "memory"}).str;
  const auto at = info.find("used_memory:");
  return std::stoll(info.substr(at + 12));
}

/// Queues `n` waiters behind one holder, pipelined in chunks.
void fill(detail::Connection& conn, Queue& q, long long n) {
  constexpr long long kChunk = 1000;
  conn.eval(detail::scripts::semaphore_open, q.key_args, {"open", kLimit, kLease});
  const detail::Script& acquire = detail::scripts::semaphore_acquire;
  conn.command({"SCRIPT", "LOAD", acquire.body});  // for the pipelined EVALSHAs below
  const std::string sha(acquire.sha1);
  for (long long done = 0; done < n + 1;) {
    const long long batch = std::min(kChunk, n + 1 - done);
    std::vector<std::vector<std::string>> owned;
    std::vector<detail::Args> commands;
    for (long long i = 0; i < batch; ++i) {
      std::vector<std::string> argv = {"EVALSHA", sha, std::to_string(q.keys.size())};
      argv.insert(argv.end(), q.keys.begin(), q.keys.end());
      const std::string id = q.new_id();
      for (const std::string& a : q.acquire_args(id)) argv.push_back(a);
      owned.push_back(std::move(argv));
    }
    for (const auto& argv : owned) commands.emplace_back(argv.begin(), argv.end());
    const std::vector<detail::Reply> replies = conn.pipeline(commands);
    for (std::size_t i = 0; i < replies.size(); ++i) {
      const detail::AcquireReply r = detail::decode_acquire(replies[i]);
      q.members.emplace_back(std::string(commands[i][3 + q.keys.size() + 3]), r.ticket);
    }
    done += batch;
  }
}

struct SlowlogTotals {
  double acquire_us = 0;
  double release_us = 0;
  long long acquires = 0;
  long long releases = 0;
};

/// Reads and clears the slowlog; adds the semaphore script's calls by operation.
void drain_slowlog(detail::Connection& conn, SlowlogTotals& totals) {
  const detail::Reply entries = conn.command({"SLOWLOG", "GET", "-1"});
  conn.command({"SLOWLOG", "RESET"});
  for (const detail::Reply& e : entries.elements) {
    // id, timestamp, duration µs, argv, client, name
    if (e.elements.size() < 4 || e.elements[3].elements.size() < 3) continue;
    const auto& argv = e.elements[3].elements;
    if (!is_script_call(argv[0].str)) continue;
    // FCALL function (or EVALSHA sha) numkeys key... operation ...
    const std::size_t op = 3 + static_cast<std::size_t>(std::stoll(argv[2].str));
    if (argv.size() <= op) continue;
    const double us = static_cast<double>(e.elements[2].integer);
    if (argv[op].str == "acquire") {
      totals.acquire_us += us;
      ++totals.acquires;
    } else if (argv[op].str == "release") {
      totals.release_us += us;
      ++totals.releases;
    }
  }
}

/// Server time per acquire and per release from SLOWLOG (at 0 µs while it lives), and their
/// round trips as the client saw them; the counters of a benchmark of acquire-release rounds.
/// With `control_admin`, the calls on that server are summed apart, as the control_* counters.
class CallTimes {
 public:
  explicit CallTimes(detail::Connection& admin, detail::Connection* control_admin = nullptr)
      : admin_(admin), control_admin_(control_admin) {
    for (detail::Connection* c : {&admin_, control_admin_}) {
      if (c == nullptr) continue;
      c->command({"CONFIG", "SET", "slowlog-log-slower-than", "0"});
      c->command({"CONFIG", "SET", "slowlog-max-len", "4096"});
      c->command({"SLOWLOG", "RESET"});
    }
  }
  /// One round's round trips, in µs; the slowlog is read every 1,000 (outside the timing).
  void add(benchmark::State& state, double acquire_us, double release_us) {
    acquire_rtt_.push_back(acquire_us);
    release_rtt_.push_back(release_us);
    if (++since_drain_ == 1000) {
      state.PauseTiming();
      drain();
      since_drain_ = 0;
      state.ResumeTiming();
    }
  }
  /// Reads the rest, puts the slowlog back as it was and sets the counters.
  void finish(benchmark::State& state) {
    drain();
    for (detail::Connection* c : {&admin_, control_admin_}) {
      if (c == nullptr) continue;
      c->command({"CONFIG", "SET", "slowlog-log-slower-than", "10000"});
      c->command({"CONFIG", "SET", "slowlog-max-len", "128"});
    }
    const auto mean = [](double sum, long long n) {
      return n > 0 ? sum / static_cast<double>(n) : 0.0;
    };
    state.counters["acquire_redis_us"] = mean(totals_.acquire_us, totals_.acquires);
    state.counters["release_redis_us"] = mean(totals_.release_us, totals_.releases);
    state.counters["acquire_p50_us"] = percentile(acquire_rtt_, 50);
    state.counters["release_p50_us"] = percentile(release_rtt_, 50);
    if (control_.acquires > 0) {
      const double pair =
          mean(totals_.acquire_us, totals_.acquires) + mean(totals_.release_us, totals_.releases);
      const double control = mean(control_.acquire_us, control_.acquires) +
                             mean(control_.release_us, control_.releases);
      state.counters["control_pair_redis_us"] = control;
      state.counters["pair_vs_control"] = control > 0 ? pair / control : 0;
    }
  }

 private:
  void drain() {
    drain_slowlog(admin_, totals_);
    if (control_admin_ != nullptr) drain_slowlog(*control_admin_, control_);
  }

  detail::Connection& admin_;
  detail::Connection* control_admin_;
  SlowlogTotals totals_;
  SlowlogTotals control_;
  std::vector<double> acquire_rtt_;
  std::vector<double> release_rtt_;
  long long since_drain_ = 0;
};

struct FilledQueue {
  explicit FilledQueue(long long n) : waiters(n), q(fmt::format("queue-{}", n)) {}
  long long waiters;
  Queue q;
  double bytes_per_waiter = 0;
};

/// Google Benchmark runs a benchmark several times (to pick its iteration count); a queue is
/// filled once, on the main server or on the control, and keeps its length from run to run.
FilledQueue& filled_queue(BenchRedis& redis, detail::Connection& conn, long long waiters) {
  static std::map<std::pair<BenchRedis*, long long>, std::unique_ptr<FilledQueue>> queues;
  auto& slot = queues[{&redis, waiters}];
  if (!slot) {
    slot = std::make_unique<FilledQueue>(waiters);
    detail::Connection& admin = redis.admin();
    const auto& k = slot->q.keys;
    admin.command({"DEL", k[0], k[1], k[2], k[3], k[4]});
    const long long before = used_memory(admin);
    fill(conn, slot->q, waiters);
    slot->bytes_per_waiter =
        static_cast<double>(used_memory(admin) - before) / static_cast<double>(waiters + 1);
  }
  return *slot;
}

/// Whose permit a timed pair's release frees.
enum class Releases {
  queue_head,  // the queue's head: the newcomer queues behind it (the hot path of a queue)
  own,         // the newcomer's own (an uncontended pair)
};

/// One acquire on `q` over `conn` by a newcomer, and one release of `who`'s permit. Their two
/// round trips, in µs, or nothing if the release did not find the permit.
std::optional<std::pair<double, double>> timed_pair(detail::Connection& conn, Queue& q,
                                                    Releases who) {
  const std::string id = q.new_id();
  const std::vector<std::string> args = q.acquire_args(id);
  auto t0 = Clock::now();
  const detail::Reply a = conn.eval(detail::scripts::semaphore_acquire, q.key_args,
                                    detail::Args(args.begin(), args.end()));
  auto t1 = Clock::now();
  std::pair<std::string, long long> holder{id, detail::decode_acquire(a).ticket};
  if (who == Releases::queue_head) {
    q.members.push_back(std::move(holder));
    holder = q.members.front();
    q.members.pop_front();
  }
  const std::string ticket = std::to_string(holder.second);
  auto t2 = Clock::now();
  const detail::Reply r = conn.eval(detail::scripts::semaphore_release, q.key_args,
                                    {"release", kLimit, kLease, holder.first, ticket, "60000"});
  auto t3 = Clock::now();
  if (detail::decode_release(r) != detail::ReleaseState::holder_released) return {};
  return std::make_pair(micros(t1 - t0), micros(t3 - t2));
}

void BM_QueueHotPath(benchmark::State& state) {
  BenchRedis& main = BenchRedis::instance();
  BenchRedis& clean = BenchRedis::control();
  detail::Connection conn(main.options());
  detail::Connection control_conn(clean.options());
  const long long waiters = state.range(0);
  FilledQueue& filled = filled_queue(main, conn, waiters);
  FilledQueue& control = filled_queue(clean, control_conn, 10);

  CallTimes times(main.admin(), &clean.admin());
  for (auto _ : state) {
    const auto timed = timed_pair(conn, filled.q, Releases::queue_head);
    if (!timed || !timed_pair(control_conn, control.q, Releases::queue_head)) {
      state.SkipWithError("the holder's release did not find it");
      break;
    }
    times.add(state, timed->first, timed->second);
  }
  times.finish(state);
  state.counters["waiters"] = static_cast<double>(waiters);
  state.counters["bytes_per_waiter"] = filled.bytes_per_waiter;
}
struct History {
  Queue q{"history"};
  long long pairs = 0;  // run so far, before the measured ones
  long long last_ticket = 0;
};

/// Runs uncontended pairs on `h`'s semaphore until it has had `n`, pipelined in chunks: limit 1
/// and nobody else, so each acquire is granted at once with the next ticket, which the release
/// in the same pipeline names. False (with `why`) when a reply was not that.
bool run_history(detail::Connection& conn, History& h, long long n, std::string& why) {
  constexpr long long kChunk = 1000;
  const detail::Script& acquire = detail::scripts::semaphore_acquire;
  const detail::Script& release = detail::scripts::semaphore_release;
  conn.command({"SCRIPT", "LOAD", acquire.body});
  conn.command({"SCRIPT", "LOAD", release.body});
  const auto with_keys = [&](const detail::Script& script) {
    std::vector<std::string> argv = {"EVALSHA", std::string(script.sha1),
                                     std::to_string(h.q.keys.size())};
    argv.insert(argv.end(), h.q.keys.begin(), h.q.keys.end());
    return argv;
  };
  while (h.pairs < n) {
    const long long batch = std::min(kChunk, n - h.pairs);
    std::vector<std::vector<std::string>> owned;
    for (long long i = 0; i < batch; ++i) {
      const std::string id = h.q.new_id();
      std::vector<std::string> a = with_keys(acquire);
      for (const std::string& arg : h.q.acquire_args(id)) a.push_back(arg);
      std::vector<std::string> r = with_keys(release);
      for (const std::string& arg :
           {std::string("release"), std::string(kLimit), std::string(kLease), id,
            std::to_string(h.last_ticket + 1 + i), std::string("60000")}) {
        r.push_back(arg);
      }
      owned.push_back(std::move(a));
      owned.push_back(std::move(r));
    }
    std::vector<detail::Args> commands;
    for (const auto& argv : owned) commands.emplace_back(argv.begin(), argv.end());
    const std::vector<detail::Reply> replies = conn.pipeline(commands);
    for (long long i = 0; i < batch; ++i) {
      const auto& granted = replies[static_cast<std::size_t>(2 * i)];
      const auto& released = replies[static_cast<std::size_t>(2 * i + 1)];
      if (detail::decode_acquire(granted).ticket != h.last_ticket + 1 + i ||
          detail::decode_release(released) != detail::ReleaseState::holder_released) {
        why = fmt::format("pair {} of the history was not granted and released in order",
                          h.pairs + i);
        return false;
      }
    }
    h.last_ticket += batch;
    h.pairs += batch;
  }
  return true;
}

void BM_PairAfterGrants(benchmark::State& state) {
  detail::Connection& admin = BenchRedis::instance().admin();
  detail::Connection conn(BenchRedis::instance().options());
  static History history;
  if (history.pairs == 0) {
    conn.eval(detail::scripts::semaphore_open, history.q.key_args, {"open", kLimit, kLease});
  }
  const auto fill_start = Clock::now();
  const long long before = history.pairs;
  std::string why;
  if (!run_history(conn, history, state.range(0), why)) {
    state.SkipWithError(why.c_str());
    return;
  }
  const double fill_s = std::chrono::duration<double>(Clock::now() - fill_start).count();
  const long long filled = history.pairs - before;
  if (state.range(1) != 0) {
    // The history's receipts (buckets that expire after them, and keys of a version that
    // kept one per receipt) are gone: no key is left to expire.
    const auto give_up = Clock::now() + std::chrono::minutes(5);
    const auto keys_expiring = [&] {
      const std::string info = admin.command({"INFO", "keyspace"}).str;
      const auto at = info.find("expires=");
      return at != std::string::npos && std::stoll(info.substr(at + 8)) > 0;
    };
    while (keys_expiring()) {
      if (Clock::now() > give_up) {
        state.SkipWithError("the receipts had not expired within 5 minutes");
        return;
      }
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }

  // The control: a semaphore without a history on a second private server, its pairs sent
  // alternately with the timed ones, so that pair_vs_control compares a pair after the history
  // (whatever it left in its server) with one on a clean server, in the same seconds of a
  // shared machine.
  BenchRedis& clean = BenchRedis::control();
  detail::Connection control_conn(clean.options());
  Queue control(fmt::format("control-{}-{}", state.range(0), state.range(1)));
  CallTimes times(admin, &clean.admin());
  for (auto _ : state) {
    const auto timed = timed_pair(conn, history.q, Releases::own);
    if (!timed || !timed_pair(control_conn, control, Releases::own)) {
      state.SkipWithError("an uncontended pair's release did not find its permit");
      break;
    }
    ++history.last_ticket;
    times.add(state, timed->first, timed->second);
  }
  times.finish(state);
  history.pairs += static_cast<long long>(state.iterations());

  state.counters["pairs_before"] = static_cast<double>(state.range(0));
  state.counters["receipts_expired"] = static_cast<double>(state.range(1));
  state.counters["history_pairs_per_s"] = filled > 0 ? static_cast<double>(filled) / fill_s : 0;
  state.counters["keys"] = static_cast<double>(admin.command({"DBSIZE"}).integer);
  long long receipts = 0;
  const std::string buckets = history.q.keys.at(6) + "*";
  for (const detail::Reply& k : admin.command({"KEYS", buckets}).elements) {
    receipts += admin.command({"HLEN", k.str}).integer;
  }
  state.counters["receipts"] = static_cast<double>(receipts);
  state.counters["used_memory_mb"] = static_cast<double>(used_memory(admin)) / 1e6;
}
// {pairs before, 1: once their receipts have expired}
BENCHMARK(BM_PairAfterGrants)
    ->Args({0, 0})
    ->Args({1'000'000, 0})
    ->Args({10'000'000, 0})
    ->Args({10'000'000, 1})
    ->Iterations(fixed_iterations())
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// A fixed count, run once: each run of a benchmark (Google Benchmark's first ones pick the
// count) would time a queue, and a control, that earlier runs of it had warmed.
BENCHMARK(BM_QueueHotPath)
    ->Arg(10)
    ->Arg(1000)
    ->Arg(10000)
    ->Arg(100000)
    ->Iterations(fixed_iterations())
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace fairsem::bench

BENCHMARK_MAIN();
