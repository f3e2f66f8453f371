#pragma once

// Client: one process's way to one Redis deployment, shared by every semaphore opened through
// it.

// Header-only mode: the first fairsem header a translation unit includes brings the whole
// implementation at its end (fairsem/impl/header_only.hpp), once the headers it includes are
// complete. See fairsem/impl/config.hpp.
#if defined(FAIRSEM_HEADER_ONLY) && !defined(FAIRSEM_IMPL_PENDING)
#define FAIRSEM_IMPL_PENDING
#define FAIRSEM_IMPL_BY_CLIENT_HPP
#endif

#include <chrono>
#include <cstddef>
#include <memory>

#include "fairsem/connection_options.hpp"
#include "fairsem/metrics.hpp"

namespace fairsem {

namespace detail {
class Runtime;
}  // namespace detail

class FairSemaphore;
class SemaphoreAdmin;

struct ClientOptions {
  /// At most this many connections make script calls at once, for every semaphore of the
  /// Client together (its waker and renewal lanes have their own); a call that finds them all busy
  /// waits for one. At least 1. A thread that already holds one (a callback such as on_lost
  /// that releases a permit, called during Permit::renew) is never made to wait for a second,
  /// so nesting cannot deadlock; it may exceed the bound by that much.
  std::size_t max_connections = 16;
  /// Threads that run asynchronous acquires (their script calls and completion callbacks),
  /// started with the first one. At least 1.
  std::size_t worker_threads = 2;
  /// Whether a Permit's destructor (and a move-assignment over a held Permit) hands its release
  /// to the worker threads instead of making the Redis call on the calling thread: for event
  /// loops (an Asio io_context) whose thread must not wait for Redis. The Permit is empty at
  /// once; its release runs soon after on a worker thread, which holds what it needs (a Permit
  /// that outlives its FairSemaphore and Client still releases), and a failure is logged as the
  /// destructor logs it. ~FairSemaphore and ~Client wait until the Client's handed-off
  /// releases are done (unless called on fairsem's own threads), so a program that destroys
  /// them before it exits loses none. Permit::release() is not affected: it still returns what
  /// it found. Off by default: the destructor then releases before it returns.
  bool release_in_background = false;
  /// Whether the script calls of the Client's threads to one node travel in batches: while one
  /// thread's call is out, the calls other threads make queue, and the next one to go carries
  /// them all, written at once on its connection and answered in order (at most 64 a batch).
  /// Redis then reads, parses and answers many calls per system call, most of what an
  /// unpipelined call costs it, so a process with many threads making calls at once costs
  /// Redis less CPU per grant (docs/benchmarks.md, "Throughput ceiling"). A call alone goes at
  /// once, as without batching; a queued call waits for the batch under way. The calls of one
  /// batch share its socket's fate: when it fails, each is retried as after a lost reply. The
  /// calls of a semaphore with min_replicas are never batched (its WAIT must follow a write of
  /// its own socket). Off by default.
  bool batch_calls = false;
  /// How long a wake-up path (a thread and its connection, one per cluster slot waited on, one
  /// in all elsewhere) and a renewal lane's connection are kept with nothing to do: no request
  /// waiting through it, no permit renewed over it. Then they close, and open again when
  /// needed. Positive, at most a day.
  std::chrono::milliseconds idle_timeout = std::chrono::seconds(30);
  /// Told of the events of every semaphore opened through the Client (metrics.hpp), unless a
  /// semaphore's SemaphoreOptions::metrics_observer says otherwise. Null: none.
  std::shared_ptr<MetricsObserver> metrics_observer = nullptr;

  /// Throws InvalidArgument naming the bad field.
  void validate() const;
};

/// What the semaphores opened through it share: the connection options, one pool of
/// connections (at most ClientOptions::max_connections busy at once; idle ones kept per cluster
/// slot), the cluster or sentinel routing, one wake-up thread and connection (per cluster slot;
/// closed when idle) whose one BRPOP waits for the wake-ups of every waiting acquire, and the
/// watchdog that renews the held permits of all of them, each at its own renew interval: one
/// renewal thread per node (the server; in a Cluster, each master), so that a
/// node that hangs delays only its own permits, and one callback thread for the callbacks those
/// renewals make. One Client per process and deployment is the normal use: a hundred semaphores
/// opened through one Client on one server hold one renewal thread, not a hundred, and a
/// thousand threads waiting in acquire() hold no connection of their own.
///
/// A handle: cheap to copy, and copies share everything. Thread-safe. What it shares lives as
/// long as its last user: a Client, a semaphore opened through it, or a Permit, so permits keep
/// being renewed after the Client and the semaphore are gone. A moved-from Client may be
/// destroyed or assigned to; anything else done with it (connection(), opening a semaphore or a
/// SemaphoreAdmin through it, a listing) throws UsedAfterMoveError.
class Client {
 public:
  /// Validates the options (InvalidArgument naming the bad field). Connects nothing: the first
  /// semaphore opened through the Client does, and reports a bad address or password then.
  explicit Client(ConnectionOptions connection, ClientOptions options = {});
  Client(const Client&);
  Client(Client&&) noexcept;
  Client& operator=(const Client&);
  Client& operator=(Client&&) noexcept;
  /// Waits until the releases this Client's Permits handed to its worker threads
  /// (ClientOptions::release_in_background, Permit::release_async) are done, except on
  /// fairsem's own threads. The rest lives on while a semaphore or a Permit uses it.
  ~Client();

  /// The options every connection of this Client uses.
  const ConnectionOptions& connection() const;

 private:
  friend class FairSemaphore;
  friend class SemaphoreAdmin;

  /// What it shares; UsedAfterMoveError for a moved-from Client.
  const std::shared_ptr<detail::Runtime>& runtime() const;

  std::shared_ptr<detail::Runtime> runtime_;
};

}  // namespace fairsem

#if defined(FAIRSEM_HEADER_ONLY) && defined(FAIRSEM_IMPL_BY_CLIENT_HPP)
#include "fairsem/impl/header_only.hpp"
#endif
