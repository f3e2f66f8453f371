// `fairsem exporter`: the server's view of every semaphore under a prefix, for Prometheus. Each
// scrape of /metrics runs one SemaphoreAdmin::list pass (every master, bounded by
// --scrape-timeout) and answers with what it found; served by prometheus-cpp's Exposer.

#include <fmt/format.h>
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>
#include <signal.h>  // NOLINT(modernize-deprecated-headers): POSIX sigset_t, sigwait

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "commands.hpp"
#include "common.hpp"
#include "status_view.hpp"

namespace fairsem::cli {

namespace {

namespace pm = ::prometheus;

/// One family of gauges (or counters), one sample per semaphore (or per tenant of one).
struct Family {
  pm::MetricFamily family;

  Family(std::string name, std::string help, pm::MetricType type = pm::MetricType::Gauge) {
    family.name = std::move(name);
    family.help = std::move(help);
    family.type = type;
  }
  void add(const SemaphoreListing& l, double value) { add(l, value, {}); }
  /// A sample of one tenant of the semaphore, labelled with it ("": the default tenant).
  void add(const SemaphoreListing& l, const TenantStatus& t, double value) {
    add(l, value, {{"tenant", t.name}});
  }
  void add(const SemaphoreListing& l, double value, std::vector<pm::ClientMetric::Label> more) {
    pm::ClientMetric m;
    m.label = {{"node", l.node}, {"semaphore", l.name}};
    m.label.insert(m.label.end(), more.begin(), more.end());
    if (family.type == pm::MetricType::Counter) {
      m.counter.value = value;
    } else {
      m.gauge.value = value;
    }
    family.metric.push_back(std::move(m));
  }
};

pm::MetricFamily single(std::string name, std::string help, double value) {
  pm::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = pm::MetricType::Gauge;
  pm::ClientMetric m;
  m.gauge.value = value;
  f.metric.push_back(std::move(m));
  return f;
}

double seconds(std::chrono::milliseconds d) { return std::chrono::duration<double>(d).count(); }

/// Each tenant's gauges, for the semaphores with tenants (has_tenants) only.
std::vector<pm::MetricFamily> tenant_families_of(const std::vector<SemaphoreListing>& found) {
  Family weight("fairsem_redis_semaphore_tenant_weight",
                "The tenant's weight (SemaphoreAdmin::set_tenant_weight; 1 unless set)");
  Family held("fairsem_redis_semaphore_tenant_units_held", "Units the tenant's holders hold");
  Family holders("fairsem_redis_semaphore_tenant_holders", "Permits the tenant holds");
  Family waiting("fairsem_redis_semaphore_tenant_units_waiting",
                 "Units the tenant's queued requests ask for");
  Family waiters("fairsem_redis_semaphore_tenant_waiters", "Requests the tenant has queued");
  Family oldest("fairsem_redis_semaphore_tenant_oldest_wait_seconds",
                "How long the tenant's longest-waiting request has been queued (none without "
                "waiters)");
  for (const SemaphoreListing& l : found) {
    if (!has_tenants(l.status)) continue;
    for (const TenantStatus& t : l.status.tenants) {
      weight.add(l, t, static_cast<double>(t.weight));
      held.add(l, t, static_cast<double>(t.held));
      holders.add(l, t, static_cast<double>(t.holders));
      waiting.add(l, t, static_cast<double>(t.waiting));
      waiters.add(l, t, static_cast<double>(t.waiters));
      if (t.oldest_wait) oldest.add(l, t, seconds(*t.oldest_wait));
    }
  }
  // None at all without tenants: the page stays as it was before tenants existed.
  std::vector<pm::MetricFamily> out;
  for (Family* f : {&weight, &held, &holders, &waiting, &waiters, &oldest}) {
    if (!f->family.metric.empty()) out.push_back(std::move(f->family));
  }
  return out;
}

/// What one listing found, as metric families.
std::vector<pm::MetricFamily> families_of(const std::vector<SemaphoreListing>& found) {
  Family limit("fairsem_redis_semaphore_limit", "The limit Redis stores for the semaphore");
  Family held("fairsem_redis_semaphore_units_held", "Units held, by every client");
  Family holders("fairsem_redis_semaphore_holders", "Permits held, by every client");
  Family waiters("fairsem_redis_semaphore_waiters", "Requests queued, by every client");
  Family lease("fairsem_redis_semaphore_shortest_lease_left_seconds",
               "The shortest lease left among the holders (none without holders)");
  Family oldest("fairsem_redis_semaphore_oldest_wait_seconds",
                "How long the longest-waiting request has been queued (none without waiters)");
  Family idle("fairsem_redis_semaphore_idle_seconds",
              "Time since a client last used the semaphore (0 while held or waited on; none "
              "where the server cannot tell)");
  Family tickets("fairsem_redis_semaphore_tickets_total",
                 "The newest ticket (fencing token): the tickets handed out, unless the "
                 "semaphore has an idle expiry",
                 pm::MetricType::Counter);
  for (const SemaphoreListing& l : found) {
    const Status& s = l.status;
    long long units = 0;
    for (const PermitInfo& p : s.holders) units += p.count;
    limit.add(l, static_cast<double>(s.limit));
    held.add(l, static_cast<double>(units));
    holders.add(l, static_cast<double>(s.holders.size()));
    waiters.add(l, static_cast<double>(s.waiters.size()));
    if (!s.holders.empty()) {
      const auto shortest = std::min_element(
          s.holders.begin(), s.holders.end(),
          [](const PermitInfo& a, const PermitInfo& b) { return a.lease_left < b.lease_left; });
      lease.add(l, seconds(shortest->lease_left));
    }
    std::optional<std::chrono::milliseconds> longest;
    for (const PermitInfo& w : s.waiters) {
      if (w.waited && (!longest || *w.waited > *longest)) longest = w.waited;
    }
    if (longest) oldest.add(l, seconds(*longest));
    if (l.idle) idle.add(l, static_cast<double>(l.idle->count()));
    tickets.add(l, static_cast<double>(std::max(0LL, s.last_ticket)));
  }
  std::vector<pm::MetricFamily> out;
  for (Family* f : {&limit, &held, &holders, &waiters, &lease, &oldest, &idle, &tickets}) {
    out.push_back(std::move(f->family));
  }
  for (pm::MetricFamily& f : tenant_families_of(found)) out.push_back(std::move(f));
  return out;
}

/// Lists the semaphores at each scrape, one scrape at a time.
class FleetCollector : public pm::Collectable {
 public:
  FleetCollector(Client client, ExporterArgs args)
      : client_(std::move(client)), args_(std::move(args)) {}

  std::vector<pm::MetricFamily> Collect() const override {
    const std::lock_guard<std::mutex> lock(mu_);
    const auto started = std::chrono::steady_clock::now();
    std::vector<pm::MetricFamily> out;
    double up = 1;
    double count = 0;
    try {
      const std::vector<SemaphoreListing> found =
          SemaphoreAdmin::list(client_, args_.key_prefix, args_.match, args_.scrape_timeout);
      count = static_cast<double>(found.size());
      out = families_of(found);
    } catch (const std::exception& e) {
      up = 0;
      fmt::print(stderr, "fairsem exporter: a scrape failed: {}\n", without_prefix(e.what()));
    }
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
    out.push_back(single("fairsem_exporter_up",
                         "1 if the last scrape listed every master, 0 if it failed", up));
    out.push_back(
        single("fairsem_exporter_semaphores", "Semaphores the last scrape listed", count));
    out.push_back(single("fairsem_exporter_scrape_duration_seconds",
                         "How long the last scrape's listing took", took.count()));
    return out;
  }

 private:
  const Client client_;
  const ExporterArgs args_;
  mutable std::mutex mu_;
};

/// Throws InvalidArgument unless `listen` is HOST:PORT (or PORT: every address) with a port from
/// 0 to 65535; the host is the Exposer's to check, by binding to it.
void check_listen(const std::string& listen) {
  const auto colon = listen.rfind(':');
  const std::string port = colon == std::string::npos ? listen : listen.substr(colon + 1);
  const bool digits =
      !port.empty() && port.size() <= 5 &&
      std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (colon == 0 || !digits || std::stol(port) > 65535) {
    throw InvalidArgument(fmt::format(
        "--listen \"{}\" is not HOST:PORT (an address of this machine and a port from 0 to "
        "65535, e.g. 127.0.0.1:9464)",
        printable(listen)));
  }
}

/// The Exposer serving on `listen`; InvalidArgument naming the address when it cannot bind
/// there (prometheus-cpp says only "null context when constructing CivetServer").
std::unique_ptr<pm::Exposer> expose(const std::string& listen) {
  try {
    return std::make_unique<pm::Exposer>(listen, 2);
  } catch (const std::exception&) {
    throw InvalidArgument(fmt::format(
        "--listen \"{}\": cannot listen there (the port is in use, or the host is not an "
        "address of this machine)",
        printable(listen)));
  }
}

}  // namespace

int exporter_main(const ExporterArgs& args) {
  const sigset_t stop = stop_signals();
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before any thread starts
  try {
    // Checked before listening: a bad prefix or pattern is a usage error, not a failed scrape.
    SemaphoreOptions prefix_check;
    prefix_check.key_prefix = args.key_prefix;
    prefix_check.validate();
    validate_name(args.match, "match pattern");
    check_listen(args.listen);
  } catch (...) {
    return report_exception("fairsem exporter");
  }
  try {
    auto collector =
        std::make_shared<FleetCollector>(Client(ConnectionOptions::from_url(args.url)), args);
    const std::unique_ptr<pm::Exposer> exposer = expose(args.listen);
    exposer->RegisterCollectable(collector);
    const std::vector<int> ports = exposer->GetListeningPorts();
    const std::string host = args.listen.substr(0, args.listen.rfind(':'));
    fmt::print("fairsem exporter: serving http://{}:{}/metrics (prefix '{}', match '{}')\n", host,
               ports.empty() ? 0 : ports.front(), args.key_prefix, args.match);
    (void)std::fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
    return 0;
  } catch (...) {
    return report_exception("fairsem exporter");
  }
}

}  // namespace fairsem::cli
