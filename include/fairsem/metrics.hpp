#pragma once

// Metrics: what one FairSemaphore handle has done so far, as a plain snapshot
// (FairSemaphore::metrics()) to export to a monitoring system. Counting costs a relaxed atomic
// increment per event and no lock; the snapshot copies the counters one by one, so counters that
// move meanwhile may be a few events apart from each other.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace fairsem {

/// Wait times of granted acquires, in the shape a Prometheus histogram takes.
struct Histogram {
  /// Upper bounds of the buckets in seconds, increasing: 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1,
  /// 5, 10, 30, 60 and +infinity.
  std::vector<double> bounds_seconds;
  /// Cumulative, like Prometheus's `le` buckets: counts[i] is how many waits took at most
  /// bounds_seconds[i]. Never decreasing; counts.back() (the +infinity bucket) == count.
  std::vector<std::uint64_t> counts;
  std::uint64_t count = 0;   // waits measured
  double sum_seconds = 0.0;  // their total, in seconds
};

/// Counters of one FairSemaphore handle (the process's view, not the semaphore's in Redis),
/// counted from its construction; they only grow. Once no call is under way (and every
/// asynchronous request has had its callback), acquire_attempts == grants + rejections +
/// timeouts + evictions_seen + errors + cancellations.
struct Metrics {
  /// Calls of try_acquire, acquire, try_acquire_for and try_acquire_until (and of
  /// SemaphoreLock's lock/try_lock*, which make them), and asynchronous requests
  /// (acquire_async, try_acquire_for_async, acquire_async_until, fairsem/asio.hpp's).
  std::uint64_t acquire_attempts = 0;
  /// Attempts that returned a permit.
  std::uint64_t grants = 0;
  /// try_acquire (or a timed acquire whose deadline had already passed) that found no free
  /// permit, and acquires refused because the queue was full (QueueFullError): the server's
  /// refusals, as MetricsObserver is told them (AcquireResult::refused).
  std::uint64_t rejections = 0;
  /// Timed acquires that gave up waiting.
  std::uint64_t timeouts = 0;
  /// Acquires ended by EvictedError (the waiter was evicted).
  std::uint64_t evictions_seen = 0;
  /// Acquires that threw anything else (ConnectionError, ReplicationError...; not
  /// QueueFullError, a rejection).
  std::uint64_t errors = 0;
  /// Asynchronous requests ended by CancelledError: cancelled (AcquireRequest::cancel, an Asio
  /// cancellation slot), or their FairSemaphore destroyed or assigned to while they waited.
  std::uint64_t cancellations = 0;
  /// Permits renewed, one per permit per renewal (by the watchdog, renew_all or
  /// Permit::renew) that extended its deadline.
  std::uint64_t renewals = 0;
  /// Failed renewals, one per permit per attempt: the renew call threw, or with min_replicas
  /// too few replicas acknowledged it, or a watchdog's renew call had no reply for a quarter of
  /// the renew interval (once per quarter it waits) (SemaphoreOptions::on_renew_failure is
  /// called for each).
  std::uint64_t renewal_failures = 0;
  /// Held permits found lost, once each: by a renewal (on_lost is called), or by a release
  /// that found the permit already gone (it returned ReleaseResult::expired).
  std::uint64_t permits_lost = 0;
  /// Releases that freed a held permit (ReleaseResult::released), by release() or ~Permit,
  /// and partial releases (Permit::release(units)).
  std::uint64_t releases = 0;
  /// The units of the permits granted: grants weighted by what each asked for.
  std::uint64_t units_granted = 0;
  /// The units those releases gave back.
  std::uint64_t units_released = 0;
  /// Successful reconnects of this handle's connections, the watchdog's included, after a
  /// connection broke or was redirected to another node. The first connect is not counted.
  std::uint64_t reconnects = 0;
  /// With ClientOptions::batch_calls: this handle's script calls answered in a batch, sent in
  /// one write with other calls of its Client (the rest went alone). Always 0 without it.
  std::uint64_t batched_calls = 0;
  /// For each grant: the time from the acquire call to its return with the permit.
  Histogram acquire_wait;
};

/// How an acquire call ended, as a MetricsObserver is told.
enum class AcquireResult {
  granted,    // it returned a permit
  timed_out,  // a timed acquire gave up at its deadline
  cancelled,  // an asynchronous request was cancelled (CancelledError)
  refused,    // try_acquire found no free units, or the queue was full (QueueFullError)
  error       // anything else: an eviction (EvictedError), a connection or reply error...
};

/// Told of each event of the semaphores it watches as it happens, for a metrics library whose
/// values are set as things happen (fairsem/prometheus.hpp keeps them in a prometheus::Registry).
/// Set it for every semaphore of a Client (ClientOptions::metrics_observer) or for one
/// (SemaphoreOptions::metrics_observer, which takes precedence). Its functions are called on the
/// thread where the event happened (a caller's, a worker thread, the renewal threads), so they
/// must be thread-safe and quick, and must not call fairsem; what they throw is ignored. Each
/// does nothing by default. `semaphore` is the semaphore's name. Costs no Redis call.
class MetricsObserver {
 public:
  MetricsObserver() = default;
  MetricsObserver(const MetricsObserver&) = delete;
  MetricsObserver& operator=(const MetricsObserver&) = delete;
  virtual ~MetricsObserver() = default;

  /// The semaphore was opened with this limit, or resized to it by this process.
  virtual void limit_set(const std::string& /*semaphore*/, long long /*limit*/) {}
  /// An acquire call (blocking or asynchronous, try_acquire included) for `units` started.
  virtual void acquire_started(const std::string& /*semaphore*/, long long /*units*/) {}
  /// That call ended: `waited` from its start to its end.
  virtual void acquire_ended(const std::string& /*semaphore*/, AcquireResult /*result*/,
                             long long /*units*/, std::chrono::nanoseconds /*waited*/) {}
  /// This process came to hold a permit of `units` (after acquire_ended with granted, or for
  /// a permit granted in the instant its request was cancelled, until it is released).
  virtual void permit_granted(const std::string& /*semaphore*/, long long /*units*/) {}
  /// A partial release (Permit::release(units)) gives back `units` of a permit that goes on.
  /// Told as the release is sent, as permit_ended is (a failed one gives nothing back here).
  virtual void units_released(const std::string& /*semaphore*/, long long /*units*/) {}
  /// A permit this process held ended, once each: released (lost false), found lost (lost
  /// true: its lease ran out, it was evicted), or dropped after its release failed (lost
  /// false). `units`: what it held until then, as told (granted less partially released);
  /// `held`: since it was granted. A release is told as it is sent, before the server can grant
  /// its units to anyone else, so that a count of units held made of these events never
  /// exceeds what the process holds (a gauge's alert on units held above the limit never fires
  /// for a hand-off); a release that then finds the permit gone tells permit_lost_at_release.
  virtual void permit_ended(const std::string& /*semaphore*/, long long /*units*/,
                            std::chrono::nanoseconds /*held*/, bool /*lost*/) {}
  /// The release of a permit told as ended (permit_ended, lost false) found it gone: its lease
  /// had run out, or it was evicted, before this process noticed. It was lost (as
  /// Metrics::permits_lost counts it).
  virtual void permit_lost_at_release(const std::string& /*semaphore*/) {}
  /// A renewal of one permit failed (as Metrics::renewal_failures counts).
  virtual void renewal_failed(const std::string& /*semaphore*/) {}
  /// With ClientOptions::batch_calls: a script call of the semaphore was answered in a batch
  /// (Metrics::batched_calls counts the same calls).
  virtual void call_batched(const std::string& /*semaphore*/) {}
};

}  // namespace fairsem
