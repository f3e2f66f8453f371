// fairsem::prometheus_observer: a MetricsObserver whose metrics live in a prometheus-cpp
// Registry (the fairsem::prometheus target).

#include "fairsem/prometheus.hpp"

#include "fairsem/errors.hpp"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace fairsem {

namespace {

namespace pm = ::prometheus;

constexpr std::array<AcquireResult, 5> kResults = {AcquireResult::granted, AcquireResult::timed_out,
                                                   AcquireResult::cancelled, AcquireResult::refused,
                                                   AcquireResult::error};

const char* label_of(AcquireResult result) {
  switch (result) {
    case AcquireResult::granted:
      return "granted";
    case AcquireResult::timed_out:
      return "timed_out";
    case AcquireResult::cancelled:
      return "cancelled";
    case AcquireResult::refused:
      return "refused";
    case AcquireResult::error:
      break;
  }
  return "error";
}

/// Bucket bounds in seconds: acquire waits from a millisecond to a minute (as Metrics'
/// histogram); permit holds from 10 ms to an hour.
const pm::Histogram::BucketBoundaries& wait_bounds() {
  static const pm::Histogram::BucketBoundaries bounds = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5,
                                                         1,     5,     10,   30,   60};
  return bounds;
}
const pm::Histogram::BucketBoundaries& hold_bounds() {
  static const pm::Histogram::BucketBoundaries bounds = {0.01, 0.1, 0.5, 1,   5,   10,
                                                         30,   60,  300, 900, 3600};
  return bounds;
}

double seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }

class PrometheusObserver final : public MetricsObserver {
 public:
  explicit PrometheusObserver(std::shared_ptr<pm::Registry> registry)
      : registry_(std::move(registry)),
        limit_(pm::BuildGauge()
                   .Name("fairsem_semaphore_limit")
                   .Help("Units the semaphore allows at once across every client, as this "
                         "process opened or resized it")
                   .Register(*registry_)),
        held_(pm::BuildGauge()
                  .Name("fairsem_semaphore_units_held")
                  .Help("Units of the semaphore this process holds")
                  .Register(*registry_)),
        waiting_(pm::BuildGauge()
                     .Name("fairsem_semaphore_requests_waiting")
                     .Help("Acquire calls of this process under way (waiting for units)")
                     .Register(*registry_)),
        wait_(pm::BuildHistogram()
                  .Name("fairsem_acquire_wait_seconds")
                  .Help("Time from an acquire call to its grant")
                  .Register(*registry_)),
        hold_(pm::BuildHistogram()
                  .Name("fairsem_permit_hold_seconds")
                  .Help("Time from a permit's grant to its release or loss")
                  .Register(*registry_)),
        acquires_(pm::BuildCounter()
                      .Name("fairsem_acquires_total")
                      .Help("Acquire calls ended, by result")
                      .Register(*registry_)),
        lost_(pm::BuildCounter()
                  .Name("fairsem_permits_lost_total")
                  .Help("Held permits found lost (lease expired, evicted)")
                  .Register(*registry_)),
        renewals_failed_(pm::BuildCounter()
                             .Name("fairsem_renewals_failed_total")
                             .Help("Failed renewals of a held permit")
                             .Register(*registry_)),
        batched_(pm::BuildCounter()
                     .Name("fairsem_batched_calls_total")
                     .Help("Script calls answered in a batch, in one write with other calls "
                           "(ClientOptions::batch_calls)")
                     .Register(*registry_)) {}

  void limit_set(const std::string& semaphore, long long limit) override {
    of(semaphore).limit->Set(static_cast<double>(limit));
  }
  void acquire_started(const std::string& semaphore, long long /*units*/) override {
    of(semaphore).waiting->Increment();
  }
  void acquire_ended(const std::string& semaphore, AcquireResult result, long long /*units*/,
                     std::chrono::nanoseconds waited) override {
    Series& s = of(semaphore);
    s.waiting->Decrement();
    s.acquires[static_cast<std::size_t>(result)]->Increment();
    if (result == AcquireResult::granted) s.wait->Observe(seconds(waited));
  }
  void permit_granted(const std::string& semaphore, long long units) override {
    of(semaphore).held->Increment(static_cast<double>(units));
  }
  void units_released(const std::string& semaphore, long long units) override {
    of(semaphore).held->Decrement(static_cast<double>(units));
  }
  void permit_ended(const std::string& semaphore, long long units, std::chrono::nanoseconds held,
                    bool lost) override {
    Series& s = of(semaphore);
    s.held->Decrement(static_cast<double>(units));
    s.hold->Observe(seconds(held));
    if (lost) s.lost->Increment();
  }
  void permit_lost_at_release(const std::string& semaphore) override {
    of(semaphore).lost->Increment();
  }
  void renewal_failed(const std::string& semaphore) override {
    of(semaphore).renewals_failed->Increment();
  }
  void call_batched(const std::string& semaphore) override { of(semaphore).batched->Increment(); }

 private:
  /// One semaphore's series, made on its first event (prometheus-cpp keeps them).
  struct Series {
    pm::Gauge* limit = nullptr;
    pm::Gauge* held = nullptr;
    pm::Gauge* waiting = nullptr;
    pm::Histogram* wait = nullptr;
    pm::Histogram* hold = nullptr;
    std::array<pm::Counter*, kResults.size()> acquires{};
    pm::Counter* lost = nullptr;
    pm::Counter* renewals_failed = nullptr;
    pm::Counter* batched = nullptr;
  };

  Series& of(const std::string& semaphore) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = series_.find(semaphore);
    if (it != series_.end()) return it->second;
    const pm::Labels labels = {{"semaphore", semaphore}};
    Series s;
    s.limit = &limit_.Add(labels);
    s.held = &held_.Add(labels);
    s.waiting = &waiting_.Add(labels);
    s.wait = &wait_.Add(labels, wait_bounds());
    s.hold = &hold_.Add(labels, hold_bounds());
    for (const AcquireResult result : kResults) {
      pm::Labels with_result = labels;
      with_result.emplace("result", label_of(result));
      s.acquires[static_cast<std::size_t>(result)] = &acquires_.Add(with_result);
    }
    s.lost = &lost_.Add(labels);
    s.renewals_failed = &renewals_failed_.Add(labels);
    s.batched = &batched_.Add(labels);
    return series_.emplace(semaphore, s).first->second;
  }

  const std::shared_ptr<pm::Registry> registry_;
  pm::Family<pm::Gauge>& limit_;
  pm::Family<pm::Gauge>& held_;
  pm::Family<pm::Gauge>& waiting_;
  pm::Family<pm::Histogram>& wait_;
  pm::Family<pm::Histogram>& hold_;
  pm::Family<pm::Counter>& acquires_;
  pm::Family<pm::Counter>& lost_;
  pm::Family<pm::Counter>& renewals_failed_;
  pm::Family<pm::Counter>& batched_;
  std::mutex mu_;
  std::map<std::string, Series> series_;
};

}  // namespace

std::shared_ptr<MetricsObserver> prometheus_observer(std::shared_ptr<pm::Registry> registry) {
  if (!registry) throw InvalidArgument("fairsem: prometheus_observer: the registry is null");
  return std::make_shared<PrometheusObserver>(std::move(registry));
}

}  // namespace fairsem
