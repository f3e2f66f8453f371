#pragma once

// How an owner of threads (the Client's worker threads, its watchdog, a waker) lets go of one
// when it is destroyed: by joining it, or, when the owner is destroyed on that very thread (the
// last reference to a Client's runtime dropped in a callback, a renewal or a wake-up), by
// parking it here. A parked thread is joined once it has finished, by the next thread parked
// after that, or at exit, by the one exit handler, registered when fairsem's first thread
// started: before the static objects that existed then (Asio's system executor, for one, which
// it may still be using) are destroyed. A thread that parks after that handler ran (it let go
// of its Client while the process was already exiting) is detached: joining it could wait on
// the application's own code for ever. Internal.

#include <cstddef>
#include <thread>

namespace fairsem::detail {

/// Joins `thread`, or parks it when this is that thread. Afterwards `thread` is empty. (Out of
/// memory to park it, or once the process is exiting, the thread is detached instead.)
void join_or_park(std::thread& thread) noexcept;

/// fairsem's own threads (a Client's workers, watchdog and waker) say so when they start: code
/// that would wait for work those threads do (a FairSemaphore's destructor) must not wait on
/// one of them.
void mark_as_fairsems_thread() noexcept;
bool on_fairsems_thread() noexcept;

/// Parked threads not joined yet (for tests).
std::size_t parked_threads() noexcept;

/// Exit handlers registered so far: one once a fairsem thread started or parked (for tests).
std::size_t exit_handlers_registered() noexcept;

/// Joins the parked threads that have finished (what every park does first).
void join_finished_parked_threads() noexcept;

}  // namespace fairsem::detail
