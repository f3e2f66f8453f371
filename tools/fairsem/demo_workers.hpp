#pragma once

// `fairsem demo`'s worker processes, and the observer outside the library that checks the
// guarantees: memory shared with the parent, written by the workers inside their critical
// section.

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace fairsem::cli::demo {

inline constexpr const char* kCommand = "fairsem demo";
inline constexpr int kMaxWorkers = 64;
inline constexpr int kMaxGrants = 1 << 16;
inline constexpr std::size_t kIdBytes = 48;

/// The steady clock's time, in ns.
long long now_ns();

enum WorkerState : int { idle = 0, waiting = 1, holding = 2, dead = 3 };

struct Grant {
  long long token;
  long long enter_ns;
  int worker;
};

struct WorkerSlot {
  std::atomic<int> state;
  std::atomic<long long> token;
  std::atomic<long long> grants;
  std::atomic<int> in_section;  // 1 while inside; whoever resets it decrements Shared::inside
  std::array<char, kIdBytes> permit_id;  // written before state becomes holding; '\0'-ended
};

struct Shared {
  std::atomic<bool> stop;
  std::atomic<int> inside;  // workers inside the critical section right now
  std::atomic<int> max_inside;
  std::atomic<int> grant_count;
  std::array<WorkerSlot, kMaxWorkers> workers;
  std::array<Grant, kMaxGrants> grants;
};

static_assert(std::atomic<long long>::is_always_lock_free, "shared-memory atomics");

/// A zeroed Shared in anonymous shared memory, for the workers forked after this; throws
/// std::system_error.
Shared* map_shared();

/// What a worker needs to open the semaphore.
struct Setup {
  std::string url;
  std::string name;
  std::string prefix;
  long long limit = 0;
  std::chrono::milliseconds lease{0};
};

std::string worker_label(int index);

/// A worker process: think, wait in line, hold for a while, release; until told to stop. Ends
/// the process (_exit) with 0, or 1 after an error.
[[noreturn]] void worker_main(const Setup& setup, Shared& shared, int index);

/// Grants that entered their critical section while a lower ticket, granted later by more
/// than the slack, was still waiting: the server promotes in ticket order, so this counts
/// overtaking as an outside observer sees it.
int count_order_violations(std::vector<Grant> grants, std::chrono::milliseconds lease);

}  // namespace fairsem::cli::demo
