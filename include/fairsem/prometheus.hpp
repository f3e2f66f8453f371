#pragma once

// fairsem's metrics in a prometheus-cpp Registry: the optional target fairsem::prometheus
// (built where prometheus-cpp is found; find_package(fairsem COMPONENTS prometheus)), for a
// service that already exports its metrics with prometheus-cpp. The names, labels and buckets
// are in docs/observability.md.
//
//   auto registry = std::make_shared<prometheus::Registry>();
//   fairsem::ClientOptions options;
//   options.metrics_observer = fairsem::prometheus_observer(registry);
//   fairsem::Client client(fairsem::ConnectionOptions::from_url(url), options);
//   prometheus::Exposer exposer("127.0.0.1:9464");
//   exposer.RegisterCollectable(registry);

#include <memory>

#include "fairsem/metrics.hpp"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace fairsem {

/// A MetricsObserver that keeps the metrics of the semaphores it observes in `registry`, each
/// labelled semaphore="<name>": fairsem_semaphore_limit, fairsem_semaphore_units_held and
/// fairsem_semaphore_requests_waiting (gauges, this process's view), the histograms
/// fairsem_acquire_wait_seconds (granted acquires) and fairsem_permit_hold_seconds (whole
/// permits, grant to end), and the counters fairsem_acquires_total{result="granted|timed_out|
/// cancelled|refused|error"}, fairsem_permits_lost_total, fairsem_renewals_failed_total and
/// fairsem_batched_calls_total (ClientOptions::batch_calls).
/// Updating one costs no Redis call, only prometheus-cpp's own atomic updates and one lookup
/// under a lock. Several observers may share a registry (they share the families). Keeps
/// `registry` alive. Throws InvalidArgument for a null registry.
std::shared_ptr<MetricsObserver> prometheus_observer(
    std::shared_ptr<prometheus::Registry> registry);

}  // namespace fairsem
