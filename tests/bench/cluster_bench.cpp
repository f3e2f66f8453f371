// Many semaphores on a Redis Cluster: aggregate grants/s when every semaphore lives on one
// master, and when they are spread over three. One private 3-master cluster (no replicas) is
// started on loopback; both runs use it, with the same client code, the same number of
// semaphores and clients, and differ only in the names (chosen by their hash slot). A first run
// puts the same load on a private standalone server, for what the cluster client costs. Prints
// one JSON line per run, then one with the ratios.
//
// On a machine with few cores every redis-server and every client share them, so the ratio
// shows how much the client side and the routing cost, not how a real cluster scales.
//
//   fairsem_bench_cluster --semaphores 12 --clients-per-semaphore 2 --seconds 5

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "fairsem/fairsem.hpp"
#include "fairsem/impl/net/router.hpp"
#include "redis_cluster.hpp"

namespace fairsem::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Settings {
  int semaphores = 12;
  int clients_per_semaphore = 2;
  double seconds = 5;
  double hold_us = 0;
};

/// `count` semaphore names; name i hashes to a slot of masters[i % masters.size()].
std::vector<std::string> names_on(const test::RedisCluster& cluster,
                                  const std::vector<int>& masters, int count,
                                  const std::string& stem) {
  std::vector<std::string> names;
  for (int i = 0, n = 0; static_cast<int>(names.size()) < count; ++n) {
    std::string name = fmt::format("{}-{}", stem, n);
    const int slot = detail::key_slot(fmt::format("fairsem:{{{}}}:owner", name));
    const int wanted = masters[static_cast<std::size_t>(i) % masters.size()];
    if (cluster.master_port_for_slot(slot) == wanted) {
      names.push_back(std::move(name));
      ++i;
    }
  }
  return names;
}

double cpu_seconds(int port) {
  ConnectionOptions o;
  o.port = port;
  detail::Connection conn(o);
  return ServerStats::read(conn).cpu_seconds;
}

/// One run: clients on `names` through `options`; Redis CPU read from `ports`.
nlohmann::json run(const ConnectionOptions& options, const std::vector<std::string>& names,
                   const std::vector<int>& ports, const Settings& s, const std::string& label,
                   std::size_t masters_used) {
  SemaphoreOptions sem_options;
  sem_options.limit = 1;

  std::vector<double> cpu_before;
  for (const int port : ports) cpu_before.push_back(cpu_seconds(port));
  std::atomic<long long> grants{0};
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::atomic<int> failed{0};
  std::vector<std::thread> clients;
  const int total = s.semaphores * s.clients_per_semaphore;
  for (int c = 0; c < total; ++c) {
    clients.emplace_back([&, c] {
      try {
        FairSemaphore sem(options, names[static_cast<std::size_t>(c % s.semaphores)], sem_options);
        ++ready;
        while (!go.load()) std::this_thread::yield();
        while (!stop.load()) {
          Permit p = sem.acquire();
          if (s.hold_us > 0) {
            std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(s.hold_us));
          }
          p.release();
          ++grants;
        }
      } catch (const std::exception& e) {
        std::cerr << "client failed: " << e.what() << "\n";
        ++failed;
        ++ready;
      }
    });
  }
  while (ready.load() < total) std::this_thread::yield();
  const auto start = Clock::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(s.seconds));  // the measured run
  stop = true;
  for (auto& t : clients) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();

  nlohmann::json cpu = nlohmann::json::array();
  double cpu_total = 0;
  for (std::size_t i = 0; i < ports.size(); ++i) {
    const double used = cpu_seconds(ports[i]) - cpu_before[i];
    cpu_total += used;
    cpu.push_back(used);
  }
  const double rate = static_cast<double>(grants.load()) / elapsed;
  return nlohmann::json{
      {"run", label},
      {"masters_used", masters_used},
      {"semaphores", s.semaphores},
      {"clients", total},
      {"seconds", elapsed},
      {"grants", grants.load()},
      {"grants_per_s", rate},
      {"failed_clients", failed.load()},
      {"redis_cpu_s_per_server", cpu},
      {"redis_cpu_us_per_grant",
       grants.load() > 0 ? cpu_total * 1e6 / static_cast<double>(grants.load()) : 0.0}};
}

}  // namespace
}  // namespace fairsem::bench

int main(int argc, char** argv) {
  using namespace fairsem::bench;
  Settings s;
  CLI::App app{"fairsem: aggregate grants/s of many semaphores on 1 vs 3 cluster masters"};
  app.add_option("--semaphores", s.semaphores, "semaphores (limit 1 each)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--clients-per-semaphore", s.clients_per_semaphore,
                 "client threads per semaphore, each with its own FairSemaphore")
      ->check(CLI::Range(1, 100));
  app.add_option("--seconds", s.seconds, "length of each run")->check(CLI::Range(0.1, 3600.0));
  app.add_option("--hold-us", s.hold_us, "time each permit is held")->check(CLI::Range(0.0, 1e6));
  CLI11_PARSE(app, argc, argv);
  try {
    // The same load on a standalone server first: what routing costs the client.
    nlohmann::json standalone;
    {
      fairsem::test::RedisServer server;
      fairsem::ConnectionOptions options;
      options.port = server.port();
      std::vector<std::string> names;
      for (int i = 0; i < s.semaphores; ++i) names.push_back(fmt::format("standalone-{}", i));
      standalone = run(options, names, {server.port()}, s, "standalone", 1);
      std::cout << standalone.dump() << std::endl;
    }
    fairsem::test::RedisCluster cluster(3, 0);
    const std::vector<int> masters = cluster.master_ports();
    fairsem::ConnectionOptions options;
    options.cluster = true;
    options.port = masters.front();
    const nlohmann::json one =
        run(options, names_on(cluster, {masters.front()}, s.semaphores, "one-master"), masters, s,
            "one-master", 1);
    std::cout << one.dump() << std::endl;
    const nlohmann::json three = run(options, names_on(cluster, masters, s.semaphores, "three"),
                                     masters, s, "three-masters", masters.size());
    std::cout << three.dump() << std::endl;
    auto rate = [](const nlohmann::json& j) { return j["grants_per_s"].get<double>(); };
    std::cout << nlohmann::json{{"three_vs_one_master_grants_ratio", rate(three) / rate(one)},
                                {"one_master_vs_standalone_grants_ratio",
                                 rate(one) / rate(standalone)},
                                {"hardware_threads", std::thread::hardware_concurrency()}}
                     .dump()
              << std::endl;
    auto failed = [](const nlohmann::json& j) { return j["failed_clients"].get<int>(); };
    return failed(standalone) + failed(one) + failed(three) > 0 ? 1 : 0;
  } catch (const std::exception& e) {
    std::cerr << "fairsem_bench_cluster: " << e.what() << "\n";
    return 1;
  }
}
