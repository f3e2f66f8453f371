#pragma once

// Permit: a granted permit of a FairSemaphore, of one or more units, released by its
// destructor.

// Header-only mode: the first fairsem header a translation unit includes brings the whole
// implementation at its end (fairsem/impl/header_only.hpp), once the headers it includes are
// complete. See fairsem/impl/config.hpp.
#if defined(FAIRSEM_HEADER_ONLY) && !defined(FAIRSEM_IMPL_PENDING)
#define FAIRSEM_IMPL_PENDING
#define FAIRSEM_IMPL_BY_PERMIT_HPP
#endif

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fairsem {

/// What Permit::release found.
enum class ReleaseResult {
  released,         // the permit was live and is now free (the next waiter was woken)
  expired,          // the permit was already gone from Redis: its lease ran out or its keys
                    // were removed, so someone else may have held it meanwhile
  already_released  // this Permit had been released (or moved from) before; nothing was sent
};

namespace detail {
class SemaphoreCore;
struct PermitState;
class AsyncAcquire;
}  // namespace detail

/// How an asynchronous release ended (Permit::release_async): `error` null and `result` what
/// release() returns, or `error` set (ConnectionError, TimeoutError...: what release() would
/// throw) and `result` ReleaseResult::already_released, to be ignored.
using ReleaseCallback = std::function<void(std::exception_ptr error, ReleaseResult result)>;

/// A granted permit. Move-only; the destructor releases it and never throws (a failed
/// release is reported to the logger, and the permit then expires with its lease). With
/// ClientOptions::release_in_background, the destructor hands the release to the Client's
/// worker threads instead of waiting for Redis.
class Permit {
 public:
  /// An empty permit (holds nothing), as left behind by a move.
  Permit() noexcept;
  Permit(Permit&& other) noexcept;
  /// Releases the permit held before (as the destructor does), then takes over `other`'s.
  Permit& operator=(Permit&& other) noexcept;
  Permit(const Permit&) = delete;
  Permit& operator=(const Permit&) = delete;
  ~Permit();

  /// True unless empty (moved from or released).
  bool held() const noexcept;
  explicit operator bool() const noexcept { return held(); }

  const std::string& id() const;
  /// The permit's ticket: strictly increasing in grant order across all clients. Pass it to
  /// the resource you protect so it can refuse a holder whose lease ran out (a paused
  /// process that resumes after its permit passed on carries an older token).
  long long fencing_token() const;
  /// The units the permit holds now: what the acquire asked for, less what release(units)
  /// gave back. 0 for an empty Permit.
  long long count() const;
  /// The permit's slots, one per unit, ascending: numbers from 0 to limit - 1 that no other
  /// live permit of the semaphore holds (slots of the holders whose leaving promoted it, or
  /// else the lowest free ones). For one slot, fencing tokens strictly increase from holder to
  /// holder, so a resource partitioned by slot (partition k, connection k, worker k) can keep
  /// the newest token per slot and refuse older ones. Empty for an empty Permit.
  std::vector<long long> slots() const;
  /// The lowest of slots(); -1 for an empty Permit.
  long long slot() const;
  /// When the lease runs out unless renewed, on this process's steady clock (estimated on
  /// the safe side: from when the renewing request was sent).
  std::chrono::steady_clock::time_point deadline() const;
  /// True once the permit was found gone from Redis (by the watchdog, renew or release), or
  /// once its deadline() passed without a renewal (e.g. while Redis could not be reached).
  bool lost() const noexcept;

  /// Renews the lease now. Returns false (and marks the permit lost, calling on_lost) if it
  /// is gone. Throws ConnectionError/TimeoutError if Redis cannot be reached.
  bool renew();
  /// Frees the permit and wakes the waiter it promotes. Releasing twice is harmless. Throws
  /// ConnectionError/TimeoutError when Redis cannot be reached (retried once first: at most two
  /// command timeouts); the permit is then dropped locally and expires with its lease. A permit
  /// known lost (on_lost was called for it) is dropped without a call: `expired` at once.
  ReleaseResult release();
  /// Gives back `units` of count() and keeps the rest: the highest slots go (and wake the
  /// waiters they let in); the permit keeps its lowest count() - units slots, its ticket and
  /// its lease. Giving back all of them is release(). Throws InvalidArgument for units below 1
  /// or above count(), and what release() throws. Expired: the permit is dropped, as by
  /// release(). Not thread-safe with other calls on the same Permit.
  ReleaseResult release(long long units);
  /// release() on one of the Client's worker threads, never on this one: the call takes the
  /// permit over (this Permit is empty when it returns) and `done` is called once, on that
  /// worker thread, with what release() returns or throws; like an AcquireCallback it must not
  /// block. For an empty Permit nothing is sent, and `done(nullptr, already_released)` is called
  /// before this returns. ~FairSemaphore and ~Client wait for pending ones (see
  /// ClientOptions::release_in_background). Throws InvalidArgument without a callback, and
  /// std::system_error if no worker thread can start (the permit is then released as the
  /// destructor would).
  void release_async(ReleaseCallback done);

 private:
  friend class detail::SemaphoreCore;
  Permit(std::shared_ptr<detail::SemaphoreCore> core,
         std::shared_ptr<detail::PermitState> state) noexcept;
  /// What the destructor does: releases here, or hands the release to a worker thread.
  void release_quietly() noexcept;
  /// Releases on this thread, logging a failure.
  void release_here() noexcept;

  std::shared_ptr<detail::SemaphoreCore> core_;
  std::shared_ptr<detail::PermitState> state_;
};

}  // namespace fairsem

#if defined(FAIRSEM_HEADER_ONLY) && defined(FAIRSEM_IMPL_BY_PERMIT_HPP)
#include "fairsem/impl/header_only.hpp"
#endif
