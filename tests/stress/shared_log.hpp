#pragma once

// The observer's shared memory: a memfd that the driver creates and every worker process
// inherits and maps. Workers write one Record per critical section (not through the library, not
// through Redis); the driver reads them, and each thread's current state, to aim its faults.

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace fairsem::stress {

constexpr std::uint64_t kMagic = 0x66616972'73656d31;  // "fairsem1"
constexpr int kMaxProcesses = 64;
constexpr int kMaxThreads = 64;
constexpr std::size_t kIdBytes = 64;
/// The most units one request asks for (--weights), and so the most slots a permit holds.
constexpr int kMaxUnits = 8;
/// The most tenants a run names (--tenants).
constexpr int kMaxTenants = 16;

/// timed_out: a request with a timeout that gave up without a permit (no token, no slots).
/// withdrawn: a request that left the queue otherwise: cancelled, or ended by an error.
enum RecordState : std::uint8_t { empty = 0, entered = 1, left = 2, timed_out = 3, withdrawn = 4 };

struct Record {
  std::int64_t token;
  std::int64_t slots[kMaxUnits];  // Permit::slots() when granted (the first kMaxUnits)
  std::int64_t kept[kMaxUnits];   // Permit::slots() after the partial release
  std::int64_t wait_ns;
  std::int64_t enter_ns;  // timed_out, withdrawn: when the call returned
  std::int64_t leave_ns;
  std::int64_t deadline_ns;  // timed_out: wait_ns + the timeout
  /// Permit::deadline() at the enter: a lease after the last call before the grant was sent.
  std::int64_t granted_deadline_ns;
  /// The longest the asking thread or one of the library's in its process was runnable but
  /// not running (waiting for a CPU) from its call until its enter (-1: unknown): a loaded
  /// machine's share of a late enter.
  std::int64_t cpu_wait_ns;
  /// A partial release: when the holder stopped using the units it gave back (written before
  /// the call, with `kept` as meant; `kept` is then overwritten by what the permit kept).
  std::int64_t partial_ns;  // 0: none
  /// When the partial release's call returned having given the units back (0: it did not, or
  /// the process died in it): Redis had them free by then.
  std::int64_t partial_done_ns;
  /// When the release's call returned having released the permit (0: it failed, or the process
  /// died first): Redis had its units free by then.
  std::int64_t release_ns;
  std::int32_t pid;
  std::int32_t units;       // asked for
  std::int32_t slot_count;  // Permit::slots().size()
  std::int32_t kept_count;
  std::uint8_t mode;  // stress::Mode
  std::uint8_t lost;
  std::uint8_t partial_failed;      // release(k) threw
  std::uint8_t previous;            // made by a client of the previous release
  std::uint8_t errored;             // withdrawn: by an error (its entry may outlive it a lease)
  std::uint8_t tenant;              // 0: none named (the default tenant); i: tenant_name(i)
  std::atomic<std::uint8_t> state;  // RecordState; written last, with release order
};

enum ThreadState : int { idle = 0, waiting = 1, holding = 2 };

struct ThreadSlot {
  std::atomic<int> state;
  std::atomic<std::int64_t> token;
  char permit_id[kIdBytes];  // written before state becomes holding
};

/// Per worker process: its slot's counters, kept across the processes that fill the slot.
struct ProcessSlot {
  std::atomic<int> pid;
  std::atomic<int> ready;  // the worker's FairSemaphore is open and its threads run
  std::atomic<std::uint64_t> acquire_errors;
  std::atomic<std::uint64_t> release_errors;
  std::atomic<std::uint64_t> rejected;   // try_acquire found no free permit
  std::atomic<std::uint64_t> timed_out;  // try_acquire_for gave up
  std::atomic<std::uint64_t> lost;       // on_lost calls
  /// Asynchronous requests with a callback, those cancel() took back, the cancels whose
  /// callback got anything but CancelledError, and the requests whose callback was not called
  /// exactly once (counted by a worker that exits normally, once its semaphore is gone): the
  /// last two are broken promises.
  std::atomic<std::uint64_t> callback_requests;
  std::atomic<std::uint64_t> cancelled;
  std::atomic<std::uint64_t> cancels_broken;
  std::atomic<std::uint64_t> callbacks_broken;
  /// Calls of a previous release's client refused as of a later data model ({-7}), and when
  /// the first refusal came (0: none).
  std::atomic<std::uint64_t> model_refusals;
  std::atomic<std::int64_t> first_refusal_ns;
  ThreadSlot threads[kMaxThreads];
};

/// What the driver tells every worker.
struct Config {
  char url[256];
  char name[128];
  char key_prefix[128];
  long long limit;
  std::int64_t lease_ms;
  std::int64_t hold_us;
  std::int64_t max_timeout_ms;  // try_acquire_for waits 0 .. this
  int threads;
  int weight_count;
  std::int32_t weights[kMaxUnits];  // a request asks for one of these, at random
  int partial_percent;              // of the sections of 2 units or more
  int min_replicas;                 // SemaphoreOptions::min_replicas (0: none)
  std::int64_t replica_timeout_ms;  // and its replica_timeout
  /// Process slots below this run clients of the previous release (previous_worker.cpp).
  int previous_processes;
  /// Process slots from this one on run with ClientOptions::batch_calls.
  int batched_from;
  char previous_version[16];  // the release those run (tests/integration/previous_release/)
  /// --tenants: each thread of this release names one of this many tenants (tenant_name()),
  /// once SharedLog::tenants_on says so.
  int tenants;
};

struct SharedLog {
  std::uint64_t magic;
  Config config;
  std::atomic<int> stop;        // workers finish their current step and exit
  std::atomic<int> full;        // the record area ran out: the run ends early
  std::atomic<int> tenants_on;  // the driver's word: requests name their thread's tenant
  std::atomic<std::uint64_t> next_record;
  std::uint64_t capacity;
  ProcessSlot processes[kMaxProcesses];

  // `capacity` records follow the header in the same mapping.
  static std::size_t bytes_for(std::uint64_t capacity) {
    return records_offset() + capacity * sizeof(Record);
  }
  static std::size_t records_offset() {
    return (sizeof(SharedLog) + alignof(Record) - 1) / alignof(Record) * alignof(Record);
  }
  Record& record(std::uint64_t i) {
    return reinterpret_cast<Record*>(reinterpret_cast<char*>(this) + records_offset())[i];
  }
};

static_assert(std::atomic<std::int64_t>::is_always_lock_free, "shared-memory atomics");
static_assert(std::atomic<std::uint8_t>::is_always_lock_free, "shared-memory atomics");

}  // namespace fairsem::stress
