// fairsem-probe: connects to Redis (or Valkey) the way fairsem does and reports what a semaphore
// call will cost there: server name, version and mode, clock, and PING / script round trips.
//
//   fairsem-probe [--url URL] [--samples N]
//
// URL defaults to $FAIRSEM_URL, then $REDIS_URL, then redis://127.0.0.1:6379.
// Exit codes: 0 ok, 64 usage error, 69 Redis unreachable or auth failed, 70 other error.

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fairsem/fairsem.hpp>

#include <cctype>
#include <string>

#include "args.hpp"

namespace {

namespace args = fairsem::args;
using args::kExitInternal;
using args::kExitUnavailable;
using args::kExitUsage;

double micros(std::chrono::nanoseconds d) { return static_cast<double>(d.count()) / 1000.0; }

}  // namespace

int main(int argc, char** argv) {
  try {
    CLI::App app{"Reports what a fairsem semaphore call costs on a Redis or Valkey server.",
                 "fairsem-probe"};
    std::string url;
    int samples = 1000;
    args::add_url(app, url);
    app.add_option("--samples", samples, "PING round trips to time")
        ->capture_default_str()
        ->transform(args::whole_number(1, 1000000));
    if (const auto exit_code =
            args::parse(app, argc, argv, "usage: fairsem-probe [--url URL] [--samples N]\n")) {
      return *exit_code;
    }
    url = args::resolve_url(url);

    auto options = fairsem::ConnectionOptions::from_url(url);
    fairsem::ServerInfo info = fairsem::probe_server(options, samples);
    // "Redis 7.0.15 (standalone)"; Valkey also names the Redis version it is compatible with.
    std::string server = info.server_name.empty() ? "an unnamed server" : info.server_name;
    server[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(server[0])));
    std::string details = info.redis_mode;
    if (info.server_version != info.redis_version) {
      details += fmt::format("{}redis_version {}", details.empty() ? "" : "; ", info.redis_version);
    }
    fmt::print("fairsem {} talking to {} {} ({}) at {}\n", fairsem::version(), server,
               info.server_version, details, info.endpoint);
    fmt::print(
        "server clock (used for every lease): {:%Y-%m-%d %H:%M:%S} UTC, server minus local clock "
        "{:+} ms\n",
        std::chrono::time_point_cast<std::chrono::seconds>(info.server_time),
        info.clock_offset.count());
    fmt::print("PING round trip over {} calls: min {:.1f} us, median {:.1f} us\n", info.samples,
               micros(info.ping_min), micros(info.ping_median));
    fmt::print("EVALSHA of an embedded script: median {:.1f} us\n", micros(info.script_median));
    return 0;
  } catch (const fairsem::InvalidArgument& e) {
    fmt::print(stderr, "{}\n", e.what());
    return kExitUsage;
  } catch (const fairsem::ConnectionError& e) {
    fmt::print(stderr, "{}\n", e.what());
    return kExitUnavailable;
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}\n", e.what());
    return kExitInternal;
  }
}
