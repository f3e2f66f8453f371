#pragma once

// How an owner of threads (the Client's worker threads, its watchdog, a waker) lets go of one
// when it is destroyed: by joining it, or, when the owner is destroyed on that very thread (the
// last reference to a Client's runtime dropped in a callback, a renewal or a wake-up), by
// parking it here. A parked thread is joined by the next thread parked after it has finished, or
// at exit, before the static objects it may still be using (Asio's system executor, for one)
// are destroyed. Internal.

#include <cstddef>
#include <thread>

namespace fairsem::detail {

/// Joins `thread`, or parks it when this is that thread. Afterwards `thread` is empty.
void join_or_park(std::thread& thread) noexcept;

/// Parked threads not joined yet (for tests).
std::size_t parked_threads() noexcept;

/// Joins the parked threads that have finished (what every park does first).
void join_finished_parked_threads() noexcept;

}  // namespace fairsem::detail
