#pragma once

// MetricCounters: the counters of one SemaphoreCore, behind FairSemaphore::metrics(). Internal.

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>

#include "fairsem/semaphore.hpp"

namespace fairsem::detail {

using std::chrono::milliseconds;

// Upper bounds of the acquire wait histogram's buckets (Metrics::acquire_wait); a last bucket,
// +infinity, takes the rest.
constexpr std::array<std::chrono::nanoseconds, 11> kWaitBounds = {
    milliseconds(1),     milliseconds(5),     milliseconds(10),   milliseconds(50),
    milliseconds(100),   milliseconds(500),   milliseconds(1000), milliseconds(5000),
    milliseconds(10000), milliseconds(30000), milliseconds(60000)};

/// The counters behind FairSemaphore::metrics(). Relaxed atomics: each is a count on its own,
/// and orders nothing else, so counting takes no lock and no fence.
struct MetricCounters {
  using Counter = std::atomic<std::uint64_t>;

  static void add(Counter& counter, std::uint64_t n = 1) noexcept {
    counter.fetch_add(n, std::memory_order_relaxed);
  }
  static std::uint64_t get(const Counter& counter) noexcept {
    return counter.load(std::memory_order_relaxed);
  }

  void record_grant(std::chrono::steady_clock::duration waited, long long units) noexcept {
    add(grants);
    add(units_granted, static_cast<std::uint64_t>(units));
    const auto ns = std::max(std::chrono::nanoseconds(0),
                             std::chrono::duration_cast<std::chrono::nanoseconds>(waited));
    std::size_t bucket = 0;
    while (bucket < kWaitBounds.size() && ns > kWaitBounds[bucket]) ++bucket;
    add(wait_buckets[bucket]);
    add(wait_nanoseconds, static_cast<std::uint64_t>(ns.count()));
  }

  Metrics snapshot() const {
    Metrics m;
    m.acquire_attempts = get(acquire_attempts);
    m.grants = get(grants);
    m.rejections = get(rejections);
    m.timeouts = get(timeouts);
    m.evictions_seen = get(evictions_seen);
    m.errors = get(errors);
    m.cancellations = get(cancellations);
    m.renewals = get(renewals);
    m.renewal_failures = get(renewal_failures);
    m.permits_lost = get(permits_lost);
    m.releases = get(releases);
    m.units_granted = get(units_granted);
    m.units_released = get(units_released);
    m.reconnects = get(*reconnects);
    m.batched_calls = get(batched_calls);
    Histogram& h = m.acquire_wait;
    h.bounds_seconds.reserve(wait_buckets.size());
    h.counts.reserve(wait_buckets.size());
    for (const auto bound : kWaitBounds) {
      h.bounds_seconds.push_back(std::chrono::duration<double>(bound).count());
    }
    h.bounds_seconds.push_back(std::numeric_limits<double>::infinity());
    // Cumulative, summed from one read of each bucket: the +infinity bucket is the count.
    for (const Counter& bucket : wait_buckets) {
      h.count += get(bucket);
      h.counts.push_back(h.count);
    }
    h.sum_seconds = static_cast<double>(get(wait_nanoseconds)) / 1e9;
    return m;
  }

  Counter acquire_attempts{0};
  Counter grants{0};
  Counter rejections{0};
  Counter timeouts{0};
  Counter evictions_seen{0};
  Counter errors{0};
  Counter cancellations{0};
  Counter renewals{0};
  Counter renewal_failures{0};
  Counter permits_lost{0};
  Counter releases{0};
  Counter units_granted{0};
  Counter units_released{0};
  Counter batched_calls{0};
  // Shared with every connection of the semaphore (Connection::count_reconnects).
  const std::shared_ptr<Counter> reconnects = std::make_shared<Counter>(0);
  std::array<Counter, kWaitBounds.size() + 1> wait_buckets{};  // one per bucket, not cumulative
  Counter wait_nanoseconds{0};
};

}  // namespace fairsem::detail
