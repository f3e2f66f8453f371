#pragma once

// One grant as fairsem_contention records it, and the records file. A client (a thread or
// process of the program, or another implementation run with --external) records each request
// itself, outside the library; the program's clients keep them in a shared-memory area of these
// fixed-size records. The file holds one record a line:
//   client,ask_ns,enter_ns,release_ns,token[,units[,slot...]]
// on CLOCK_MONOTONIC (steady_clock): ask = acquire() called, enter = the critical section
// starts, release = release() called.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fairsem::bench::contention {

struct Record {
  std::int32_t client = 0;
  std::int64_t ask_ns = 0;
  std::int64_t enter_ns = 0;
  std::int64_t release_ns = 0;
  std::int64_t token = -1;  // -1: the implementation has no fencing token
  std::int64_t units = 1;   // permits asked for (and, when granted, held) at once
  /// The permit's slots (weighted runs of fairsem), for slot_checks() in contention_order.hpp:
  /// the first slots_kept of `slots`; -1 when it had more than kSlotsKept.
  static constexpr std::size_t kSlotsKept = 8;
  std::int32_t slots_kept = 0;
  std::array<std::int32_t, kSlotsKept> slots{};

  void add_slot(long long slot) {
    if (slots_kept < 0) return;
    if (static_cast<std::size_t>(slots_kept) == kSlotsKept) {
      slots_kept = -1;
      return;
    }
    slots[static_cast<std::size_t>(slots_kept++)] = static_cast<std::int32_t>(slot);
  }

  /// False for a request that gave up when the run ended: enter_ns is -1 and release_ns the
  /// time it gave up.
  bool granted() const { return enter_ns >= 0; }
  /// Until when the request waited: its grant, or the moment it gave up.
  std::int64_t waited_until() const { return granted() ? enter_ns : release_ns; }
};

/// The records of `path`, one a line; units default to 1 when a line has no sixth field.
std::vector<Record> read_records(const std::string& path);
/// Writes `records` to `path`, with the units and slots when `units` (weighted runs).
void write_records(const std::string& path, const std::vector<Record>& records, bool units);

}  // namespace fairsem::bench::contention
