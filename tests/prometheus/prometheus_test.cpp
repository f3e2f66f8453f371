// fairsem's metrics as a real Prometheus sees them: Debian's prometheus server, started on a
// free loopback port, scrapes `fairsem exporter` (the server's view of every semaphore under a
// prefix) and fairsem-prometheus-service (a service instrumented with fairsem::prometheus) every
// second while the service works under load. The test then asks Prometheus's HTTP API for each
// series and checks it against what the service says it did and what the test itself holds.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "fairsem/fairsem.hpp"
#include "redis_server.hpp"
#include "test_env.hpp"
#include "wait.hpp"

#ifndef FAIRSEM_CLI
#error "FAIRSEM_CLI (the fairsem binary) must be defined by the build"
#endif
#ifndef FAIRSEM_PROMETHEUS_SERVICE
#error "FAIRSEM_PROMETHEUS_SERVICE (the instrumented example) must be defined by the build"
#endif

namespace fairsem {
namespace {

using namespace std::chrono_literals;
using test::ChildProcess;

/// The body of GET http://127.0.0.1:`port``path` (HTTP/1.0: the server closes when done), or
/// nullopt when nothing answers with 200.
std::optional<std::string> http_get(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(request.size())) {
      char buf[4096];
      ssize_t n = 0;
      while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0)
        response.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  const auto body = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.", 0) != 0 || response.find(" 200 ") != 8 ||
      body == std::string::npos) {
    return std::nullopt;
  }
  return response.substr(body + 4);
}

std::string url_encode(const std::string& text) {
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

/// Debian's prometheus on a free loopback port, its data in a directory of its own, scraping
/// `targets` (job name -> port) every second.
class PrometheusServer {
 public:
  explicit PrometheusServer(const std::map<std::string, int>& targets)
      : dir_(std::filesystem::temp_directory_path() /
             ("fairsem-prometheus-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(dir_);
    {
      std::ofstream config(dir_ / "prometheus.yml");
      config << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n";
      for (const auto& [job, port] : targets) {
        config << "  - job_name: " << job
               << "\n    static_configs:\n      - targets: ['127.0.0.1:" << port << "']\n";
      }
    }
    // A port taken between the pick and the bind: the next attempt picks another.
    for (int attempt = 0; attempt < 5 && !process_; ++attempt) {
      port_ = test::free_loopback_port();
      auto p = std::make_unique<ChildProcess>(std::vector<std::string>{
          binary(), "--config.file=" + (dir_ / "prometheus.yml").string(),
          "--storage.tsdb.path=" + (dir_ / "data").string(),
          "--web.listen-address=127.0.0.1:" + std::to_string(port_), "--log.level=warn"});
      const auto give_up = std::chrono::steady_clock::now() + 60s;
      while (std::chrono::steady_clock::now() < give_up && !p->wait_exit(0ms)) {
        if (http_get(port_, "/-/ready")) {
          process_ = std::move(p);
          break;
        }
        std::this_thread::sleep_for(50ms);
      }
    }
    if (!process_) throw std::runtime_error("prometheus did not become ready on a free port");
  }
  ~PrometheusServer() {
    process_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  /// Absolute path of Debian's prometheus; throws saying how to install it.
  static std::string binary() {
    for (const char* path : {"/usr/bin/prometheus", "/usr/local/bin/prometheus"}) {
      if (::access(path, X_OK) == 0) return path;
    }
    throw std::runtime_error("prometheus is not installed (apt-get install prometheus)");
  }

  /// The one value an instant query returns; nullopt for none, several, or no answer.
  std::optional<double> value(const std::string& promql) const {
    const auto body = http_get(port_, "/api/v1/query?query=" + url_encode(promql));
    if (!body) return std::nullopt;
    const auto j = nlohmann::json::parse(*body, nullptr, false);
    if (j.is_discarded() || j.value("status", "") != "success") return std::nullopt;
    const auto& result = j.at("data").at("result");
    if (result.size() != 1) return std::nullopt;
    return std::stod(result.at(0).at("value").at(1).get<std::string>());
  }

  /// Waits until `promql` has the value `want`: Prometheus scrapes every second, so 20 s is
  /// many scrapes (and keeps a failing test's checks within ctest's timeout).
  bool reaches(const std::string& promql, double want, std::string& last) const {
    const auto give_up = std::chrono::steady_clock::now() + 20s;
    for (;;) {
      const std::optional<double> v = value(promql);
      last = v ? std::to_string(*v) : "(no single series)";
      if (v && *v == want) return true;
      if (std::chrono::steady_clock::now() >= give_up) return false;
      std::this_thread::sleep_for(100ms);
    }
  }

 private:
  std::filesystem::path dir_;
  int port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

/// The port a process printed in "...http://127.0.0.1:PORT/metrics...".
int port_in(const std::string& line) {
  const auto at = line.find("127.0.0.1:");
  if (at == std::string::npos) return 0;
  return std::stoi(line.substr(at + 10));
}

TEST(PrometheusTest, ARealPrometheusScrapesTheExporterAndAnInstrumentedServiceUnderLoad) {
  const std::string prefix = test::unique_prefix();
  const std::string url = test::RedisEnvironment::instance().url();

  // The test's own semaphore: one holder and one waiter, for the exporter to show.
  Client client(test::redis_options());
  SemaphoreOptions options;
  options.limit = 1;
  options.key_prefix = prefix;
  FairSemaphore held(client, "held-by-test", options);
  Permit holder = held.acquire();
  std::future<Permit> waiter = held.acquire_async();

  ChildProcess exporter(
      {FAIRSEM_CLI, "exporter", "--listen", "127.0.0.1:0", "--prefix", prefix, "--url", url});
  const auto exporter_line = exporter.expect("fairsem exporter: serving");
  ASSERT_TRUE(exporter_line) << exporter.stderr_text();
  ChildProcess service({FAIRSEM_PROMETHEUS_SERVICE, "--listen", "127.0.0.1:0", "--prefix", prefix,
                        "--name", "service", "--limit", "2", "--threads", "4", "--turns", "250",
                        "--start-on-stdin", "--batch-calls", "--url", url});
  const auto service_line = service.expect("metrics:");
  ASSERT_TRUE(service_line) << service.stderr_text();

  const PrometheusServer prometheus(
      {{"exporter", port_in(*exporter_line)}, {"service", port_in(*service_line)}});
  std::string last;
  // The load starts once Prometheus scrapes the service.
  ASSERT_TRUE(prometheus.reaches("up{job=\"service\"}", 1, last)) << last;
  service.write_stdin("start\n");
  const auto tally_line = service.expect("{", 120s);
  ASSERT_TRUE(tally_line) << service.transcript() << service.stderr_text();
  const auto tally = nlohmann::json::parse(*tally_line);
  ASSERT_EQ(0, tally.at("error").get<int>()) << *tally_line;
  ASSERT_GT(tally.at("granted").get<double>(), 1000) << *tally_line;

  const auto expect_value = [&](const std::string& promql, double want) {
    EXPECT_TRUE(prometheus.reaches(promql, want, last))
        << promql << " = " << last << ", expected " << want;
  };
  // The service, as its own process counted it.
  const std::string s = "{job=\"service\",semaphore=\"service\"";
  for (const char* result : {"granted", "refused", "timed_out", "cancelled", "error"}) {
    expect_value("fairsem_acquires_total" + s + ",result=\"" + result + "\"}",
                 tally.at(result).get<double>());
  }
  expect_value("fairsem_acquire_wait_seconds_count" + s + "}", tally.at("granted").get<double>());
  expect_value("fairsem_permit_hold_seconds_count" + s + "}", tally.at("granted").get<double>());
  expect_value("fairsem_semaphore_limit" + s + "}", 2);
  expect_value("fairsem_semaphore_units_held" + s + "}", 0);
  expect_value("fairsem_semaphore_requests_waiting" + s + "}", 0);
  expect_value("fairsem_permits_lost_total" + s + "}", 0);
  // Its calls in batches (--batch-calls): as many counted as its own metrics() says.
  expect_value("fairsem_batched_calls_total" + s + "}", tally.at("batched_calls").get<double>());
  // Scraped while it worked: never more units held than the limit, and some held.
  expect_value("max_over_time(fairsem_semaphore_units_held" + s + "}[10m]) <= bool 2", 1);
  expect_value("max_over_time(fairsem_semaphore_units_held" + s + "}[10m]) > bool 0", 1);

  // The exporter: the server's view of both semaphores.
  const std::string held_by_test = "{job=\"exporter\",semaphore=\"held-by-test\"";
  expect_value("fairsem_redis_semaphore_limit" + held_by_test + "}", 1);
  expect_value("fairsem_redis_semaphore_holders" + held_by_test + "}", 1);
  expect_value("fairsem_redis_semaphore_units_held" + held_by_test + "}", 1);
  expect_value("fairsem_redis_semaphore_waiters" + held_by_test + "}", 1);
  expect_value("fairsem_redis_semaphore_idle_seconds" + held_by_test + "}", 0);
  // Queued before the load began, so waiting for more than a second now.
  expect_value("fairsem_redis_semaphore_oldest_wait_seconds" + held_by_test + "} > bool 1", 1);
  expect_value("fairsem_redis_semaphore_shortest_lease_left_seconds" + held_by_test + "} > bool 0",
               1);
  expect_value("fairsem_redis_semaphore_limit{job=\"exporter\",semaphore=\"service\"}", 2);
  expect_value("fairsem_redis_semaphore_holders{job=\"exporter\",semaphore=\"service\"}", 0);
  // Every grant drew a ticket (the timed-out request did too; the cancelled one may not have
  // reached Redis).
  expect_value(
      "fairsem_redis_semaphore_tickets_total{job=\"exporter\",semaphore=\"service\"} >= "
      "bool " +
          std::to_string(tally.at("granted").get<long long>() + 1),
      1);
  expect_value("fairsem_exporter_semaphores{job=\"exporter\"}", 2);
  expect_value("fairsem_exporter_up{job=\"exporter\"}", 1);
  expect_value("up{job=\"exporter\"}", 1);
  expect_value("up{job=\"service\"}", 1);

  // The waiter is served once the test lets go, and the exporter sees it.
  holder.release();
  Permit served = waiter.get();
  expect_value("fairsem_redis_semaphore_waiters" + held_by_test + "}", 0);
  expect_value("absent(fairsem_redis_semaphore_oldest_wait_seconds" + held_by_test + "})", 1);
  expect_value("fairsem_redis_semaphore_holders" + held_by_test + "}", 1);
  served.release();
  service.close_stdin();
  exporter.signal(SIGTERM);
}

/// The value of the sample of `metric` whose labels include `labels` on the exposition `page`;
/// nullopt when there is none.
std::optional<double> sample(const std::string& page, const std::string& metric,
                             const std::string& labels) {
  std::istringstream lines(page);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(metric + "{", 0) != 0 || line.find(labels) == std::string::npos) continue;
    return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return std::nullopt;
}

// Tenants, as the exporter serves them: each one's gauges, labelled with it, for a semaphore
// with tenants; none at all for one without.
TEST(PrometheusTest, TheExporterShowsEachTenantOfTheSemaphoresWithTenants) {
  const std::string prefix = test::unique_prefix();
  Client client(test::redis_options());
  SemaphoreAdmin(client, "shared", prefix).set_tenant_weight("b", 3);
  SemaphoreOptions options;
  options.limit = 3;
  options.key_prefix = prefix;
  FairSemaphore plain(client, "plain", options);
  Permit plain_permit = plain.acquire();
  options.tenant = "a";
  FairSemaphore a(client, "shared", options);
  Permit a_permit = a.acquire(2);
  options.tenant = "b";
  FairSemaphore b(client, "shared", options);
  std::future<Permit> b_waiter = b.acquire_async(2);  // 1 unit free: it waits
  SemaphoreAdmin shared(client, "shared", prefix);
  ASSERT_TRUE(test::wait_until([&] { return shared.status().waiters.size() == 1; }));

  ChildProcess exporter({FAIRSEM_CLI, "exporter", "--listen", "127.0.0.1:0", "--prefix", prefix,
                         "--url", test::RedisEnvironment::instance().url()});
  const auto exporter_line = exporter.expect("fairsem exporter: serving");
  ASSERT_TRUE(exporter_line) << exporter.stderr_text();
  const std::optional<std::string> page = http_get(port_in(*exporter_line), "/metrics");
  ASSERT_TRUE(page);
  const std::string ta = "semaphore=\"shared\",tenant=\"a\"}";
  const std::string tb = "semaphore=\"shared\",tenant=\"b\"}";
  const auto expect = [&](const std::string& metric, const std::string& labels, double want) {
    EXPECT_EQ(std::optional<double>(want), sample(*page, metric, labels))
        << metric << " " << labels << "\n"
        << *page;
  };
  expect("fairsem_redis_semaphore_tenant_weight", ta, 1);
  expect("fairsem_redis_semaphore_tenant_weight", tb, 3);
  expect("fairsem_redis_semaphore_tenant_units_held", ta, 2);
  expect("fairsem_redis_semaphore_tenant_holders", ta, 1);
  expect("fairsem_redis_semaphore_tenant_units_held", tb, 0);
  expect("fairsem_redis_semaphore_tenant_units_waiting", ta, 0);
  expect("fairsem_redis_semaphore_tenant_units_waiting", tb, 2);
  expect("fairsem_redis_semaphore_tenant_waiters", tb, 1);
  EXPECT_GE(sample(*page, "fairsem_redis_semaphore_tenant_oldest_wait_seconds", tb).value_or(-1), 0)
      << *page;
  EXPECT_FALSE(sample(*page, "fairsem_redis_semaphore_tenant_oldest_wait_seconds", ta)) << *page;
  // The semaphore without tenants: its gauges as before, and no tenant's.
  expect("fairsem_redis_semaphore_units_held", "semaphore=\"plain\"}", 1);
  std::istringstream lines(*page);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_FALSE(line.find("semaphore=\"plain\"") != std::string::npos &&
                 line.find("tenant") != std::string::npos)
        << line;
  }

  a_permit.release();
  b_waiter.get().release();
  plain_permit.release();
  exporter.signal(SIGTERM);
}

}  // namespace
}  // namespace fairsem
