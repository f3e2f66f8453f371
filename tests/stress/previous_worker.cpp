// The stress harness's worker threads of an earlier release (--previous-processes): a rolling
// upgrade, with processes of that release and of this one on the same semaphore under the same
// faults. Each thread is a client of 0.3.1 (or of Config::previous_version, e.g. 0.4.0) as its
// library behaved on the wire: its scripts (test::PreviousClient,
// tests/integration/previous_release/VERSION/) run with EVALSHA, a random
// permit id per request, and a Client inbox of its own that its waiters name (CLIENT). A call
// whose reply was lost is sent again: the acquire with ticket 0 (the script finds the entry the
// lost run made), the release with its ticket (its receipt tells "released by the lost run").
// A waiter waits on its inbox and polls with its ticket (which also renews its entry) every
// lease / 3; a wake-up TICKET:SLOTS for its ticket is its grant, taken at once while the
// deadline of its last call has more than half a lease left (else it polls first); EVICTED or
// TOO-LARGE ends it; a timed wait leaves at its timeout. A holder sometimes renews through
// renew.lua half way through its section. Sections are logged like the others'
// (stress_worker.cpp), so the checker holds both releases to the same promises. A call that
// 0.4.0's scripts refuse as of a later data model ({-7}: the semaphore was upgraded to tenants'
// model 3) is counted apart (ProcessSlot::model_refusals, and when the first came): the
// request ends there, as DataModelError ended it, and a holder's permit is left to expire.

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "checker.hpp"
#include "fairsem/fairsem.hpp"
#include "previous_client.hpp"
#include "shared_log.hpp"
#include "stress_worker.hpp"

namespace fairsem::stress {
namespace {

using detail::Reply;

/// How long a call is sent again after lost replies (a restart, a cut) before it counts as
/// failed: the library's default retry budget is longer, but a thread must come back to the
/// stop flag.
constexpr milliseconds kRetryFor{3000};

class PreviousThread {
 public:
  PreviousThread(SharedLog& log, ProcessSlot& ps, ThreadSlot& ts, const ConnectionOptions& options,
                 std::uint64_t seed)
      : log_(log),
        cfg_(log.config),
        ps_(ps),
        ts_(ts),
        rng_(seed),
        client_(cfg_.previous_version, options, cfg_.key_prefix, cfg_.name, cfg_.limit,
                milliseconds(cfg_.lease_ms)),
        inbox_(random_hex(16)) {}

  void run() {
    while (log_.stop.load() == 0) {
      if (!one_request()) break;
    }
    ts_.state.store(idle);
  }

 private:
  /// A call sent until it gets a reply, or nullopt after kRetryFor of failures. sent_: when the
  /// attempt that got the reply was sent.
  template <typename Call>
  std::optional<Reply> with_retries(Call call) {
    const auto until = Clock::now() + kRetryFor;
    for (;;) {
      try {
        sent_ = Clock::now();
        return call();
      } catch (const Error&) {
        if (Clock::now() >= until || log_.stop.load() != 0) return std::nullopt;
        std::this_thread::sleep_for(milliseconds(20));
      }
    }
  }

  std::string random_hex(int n) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (int i = 0; i < n; ++i) out += kHex[rng_() % 16];
    return out;
  }

  /// The lease deadline a reply {.., deadline, .., now, ..} sets, on this process's clock: from
  /// when its call was sent, so never later than the server's.
  std::int64_t deadline_of(const Reply& r, std::size_t deadline_at, std::size_t now_at) const {
    return to_ns(sent_) + ms_to_ns(r.elements[deadline_at].integer - r.elements[now_at].integer);
  }

  /// One request: false when the log is full.
  bool one_request() {
    static constexpr Mode kModes[] = {Mode::acquire, Mode::try_acquire, Mode::try_acquire,
                                      Mode::try_acquire_for, Mode::try_acquire_for};
    const Mode mode = kModes[rng_() % std::size(kModes)];
    const long long units = cfg_.weights[rng_() % static_cast<std::uint64_t>(cfg_.weight_count)];
    const auto timeout = milliseconds(rng_() % static_cast<std::uint64_t>(cfg_.max_timeout_ms + 1));
    const std::string id = "old-" + random_hex(20);
    ts_.state.store(waiting);
    const std::int64_t wait_ns = now_ns();
    const auto started = Clock::now();
    const char* how = mode == Mode::try_acquire ? "try" : "queue";
    std::optional<Reply> r =
        with_retries([&] { return client_.acquire(id, how, 0, units, inbox_); });
    for (;;) {
      if (refused(r)) {
        ts_.state.store(idle);
        std::this_thread::sleep_for(milliseconds(10));
        return true;
      }
      if (!r || r->elements.size() < 6) return failed();
      const long long state = r->elements[0].integer;
      const long long ticket = r->elements[1].integer;
      if (state == 1) {
        std::vector<std::int64_t> slots;
        for (std::size_t i = 5; i < r->elements.size(); ++i)
          slots.push_back(r->elements[i].integer);
        return hold(id, ticket, units, mode, wait_ns, deadline_of(*r, 2, 4), slots);
      }
      if (state == 0) {
        ps_.rejected.fetch_add(1);
        ts_.state.store(idle);
        return true;
      }
      if (state != 2) return failed();  // evicted, or too large for the limit
      // Queued: the entry's deadline as this call set it.
      const std::int64_t entry_deadline = deadline_of(*r, 2, 4);
      const auto next_poll = Clock::now() + milliseconds(cfg_.lease_ms / 3);
      for (;;) {
        if (mode == Mode::try_acquire_for && Clock::now() >= started + timeout) {
          return leave(id, ticket, units, wait_ns, timeout);
        }
        if (log_.stop.load() != 0) {
          (void)with_retries([&] { return client_.release(id, ticket, {"leaving"}); });
          ts_.state.store(idle);
          return true;
        }
        auto until = next_poll;
        if (mode == Mode::try_acquire_for) until = std::min(until, started + timeout);
        if (Clock::now() >= until) break;  // poll
        const auto wait = std::chrono::duration_cast<milliseconds>(until - Clock::now());
        std::optional<std::string> message;
        try {
          const Reply popped = client_.wait_on_inbox(inbox_, std::max(wait, milliseconds(1)));
          if (popped.elements.size() == 2) message = popped.elements[1].str;
        } catch (const Error&) {
          break;  // the inbox connection broke: the poll says where the waiter stands
        }
        if (!message) continue;
        const auto space = message->find(' ');
        // Another request's (an earlier id of this thread's): not this one's.
        if (space == std::string::npos || message->substr(0, space) != id) continue;
        const std::string what = message->substr(space + 1);
        if (what == "evicted" || what == "too-large") return failed();
        const auto colon = what.find(':');
        if (colon == std::string::npos || what.substr(0, colon) != std::to_string(ticket)) break;
        std::vector<std::int64_t> slots;
        std::stringstream in(what.substr(colon + 1));
        for (std::string slot; std::getline(in, slot, ',');) slots.push_back(std::stoll(slot));
        // Promoted: taken at once while the last call's deadline has more than half a lease
        // left, as 0.3.1 did; otherwise the poll renews it first.
        if (static_cast<long long>(slots.size()) == units &&
            entry_deadline - now_ns() > ms_to_ns(cfg_.lease_ms / 2)) {
          return hold(id, ticket, units, mode, wait_ns, entry_deadline, slots);
        }
        break;
      }
      r = with_retries([&] { return client_.acquire(id, "queue", ticket, units, inbox_); });
    }
  }

  /// Whether `r` refused the call as of a later data model ({-7, ...}); counts it, with when
  /// the refusal came (a call sent before the upgrade may run after it: a delay, a retry).
  bool refused(const std::optional<Reply>& r) {
    if (!r || r->elements.empty() || r->elements[0].integer != -7) return false;
    ps_.model_refusals.fetch_add(1);
    const std::int64_t at = now_ns();
    std::int64_t seen = ps_.first_refusal_ns.load();
    while ((seen == 0 || at < seen) && !ps_.first_refusal_ns.compare_exchange_weak(seen, at)) {
    }
    return true;
  }

  bool failed() {
    ps_.acquire_errors.fetch_add(1);
    ts_.state.store(idle);
    std::this_thread::sleep_for(milliseconds(10));
    return true;
  }

  /// A timed wait that gave up: it leaves (a promotion at that instant is given back).
  bool leave(const std::string& id, long long ticket, long long units, std::int64_t wait_ns,
             milliseconds timeout) {
    const std::int64_t end_ns = now_ns();
    (void)with_retries([&] { return client_.release(id, ticket, {"leaving"}); });
    ts_.state.store(idle);
    ps_.timed_out.fetch_add(1);
    Record* r = next_record(log_);
    if (r == nullptr) return false;
    r->units = static_cast<std::int32_t>(units);
    r->wait_ns = wait_ns;
    r->enter_ns = end_ns;
    r->deadline_ns = wait_ns + ms_to_ns(timeout.count());
    r->pid = static_cast<std::int32_t>(::getpid());
    r->mode = static_cast<std::uint8_t>(Mode::try_acquire_for);
    r->previous = 1;
    r->state.store(timed_out, std::memory_order_release);
    return true;
  }

  /// The critical section of a grant whose lease ends at `deadline_ns` (this process's clock),
  /// logged as stress_worker.cpp's hold() logs one.
  bool hold(const std::string& id, long long ticket, long long units, Mode mode,
            std::int64_t wait_ns, std::int64_t deadline_ns,
            const std::vector<std::int64_t>& slots) {
    Record* record = next_record(log_);
    if (record == nullptr) {
      (void)with_retries([&] { return client_.release(id, ticket); });
      return false;
    }
    Record& r = *record;
    r.token = ticket;
    r.units = static_cast<std::int32_t>(units);
    r.slot_count = static_cast<std::int32_t>(slots.size());
    std::copy_n(slots.begin(), std::min<std::size_t>(slots.size(), kMaxUnits), r.slots);
    r.wait_ns = wait_ns;
    r.enter_ns = now_ns();
    r.deadline_ns = deadline_ns;
    r.cpu_wait_ns = -1;
    r.pid = static_cast<std::int32_t>(::getpid());
    r.mode = static_cast<std::uint8_t>(mode);
    r.previous = 1;
    r.state.store(entered, std::memory_order_release);
    copy_string(ts_.permit_id, kIdBytes, id);
    ts_.token.store(ticket);
    ts_.state.store(holding);

    const auto held_for =
        std::chrono::microseconds(rng_() % static_cast<std::uint64_t>(cfg_.hold_us + 1));
    bool lost = false;
    if (rng_() % 3 == 0) {
      // Renewed half way through, as its watchdog would: {now, deadline, state}.
      std::this_thread::sleep_for(held_for / 2);
      const auto renewed = with_retries([&] { return client_.renew(id, ticket); });
      if (refused(renewed)) {
        lost = true;  // no longer renewed: its lease runs out
      } else if (renewed && renewed->elements.size() == 3 && renewed->elements[2].integer == 1) {
        r.deadline_ns = deadline_of(*renewed, 1, 0);
      } else if (renewed && renewed->elements.size() == 3) {
        lost = true;  // expired or evicted: no longer a holder
      }
      std::this_thread::sleep_for(held_for - held_for / 2);
    } else if (units >= 2 && static_cast<int>(rng_() % 100) < cfg_.partial_percent) {
      std::this_thread::sleep_for(held_for / 2);
      const long long keep =
          1 + static_cast<long long>(rng_() % static_cast<std::uint64_t>(units - 1));
      // As the permit means to keep them: its lowest slots (the script keeps those).
      r.kept_count = static_cast<std::int32_t>(keep);
      std::copy_n(slots.begin(), keep, r.kept);
      r.partial_ns = now_ns();
      std::atomic_signal_fence(std::memory_order_seq_cst);
      const auto kept = with_retries([&] {
        return client_.release(id, ticket, {"keep", std::to_string(keep)});
      });
      if (refused(kept)) {
        r.partial_failed = 1;
      } else if (!kept || kept->elements.empty() || kept->elements[0].integer != 1) {
        r.partial_failed = 1;
        ps_.release_errors.fetch_add(1);
      } else {
        r.partial_done_ns = now_ns();
      }
      std::this_thread::sleep_for(held_for - held_for / 2);
    } else if (held_for.count() > 0) {
      std::this_thread::sleep_for(held_for);
    }
    r.leave_ns = now_ns();
    r.lost = lost || r.leave_ns >= r.deadline_ns ? 1 : 0;
    r.state.store(left, std::memory_order_release);
    ts_.state.store(idle);
    const auto released = with_retries([&] { return client_.release(id, ticket); });
    if (refused(released)) {
      // Not released: its permit expires at its deadline.
    } else if (!released || released->elements.empty()) {
      ps_.release_errors.fetch_add(1);
    } else if (released->elements[0].integer == 0) {
      ps_.lost.fetch_add(1);  // expired before the release, as on_lost would have said
    } else {
      r.release_ns = now_ns();
    }
    return true;
  }

  SharedLog& log_;
  const Config& cfg_;
  ProcessSlot& ps_;
  ThreadSlot& ts_;
  std::mt19937_64 rng_;
  test::PreviousClient client_;
  std::string inbox_;  // this thread's Client's inbox (CLIENT), for its waiters' wake-ups
  Clock::time_point sent_{};
};

}  // namespace

void previous_worker(SharedLog& log, int slot, const ConnectionOptions& options) {
  ProcessSlot& ps = log.processes[slot];
  std::vector<std::optional<PreviousThread>> clients(static_cast<std::size_t>(log.config.threads));
  std::random_device rd;
  while (log.stop.load() == 0) {
    try {
      for (auto& c : clients) {
        const std::uint64_t seed = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
        if (!c) c.emplace(log, ps, ps.threads[&c - clients.data()], options, seed);
      }
      break;
    } catch (const Error&) {
      std::this_thread::sleep_for(milliseconds(20));  // Redis is restarting
    }
  }
  std::vector<std::thread> threads;
  for (auto& c : clients) {
    if (c) threads.emplace_back([&c] { c->run(); });
  }
  ps.ready.store(1);
  for (auto& t : threads) t.join();
}

}  // namespace fairsem::stress
