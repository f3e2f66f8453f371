#pragma once

// What every fairsem benchmark shares: the Redis it measures against (FAIRSEM_BENCH_URL, or a
// private redis-server on a free loopback port), server-side cost read from INFO before and
// after a run, and percentiles.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fairsem/connection_options.hpp"
#include "fairsem/impl/net/connection.hpp"

namespace fairsem::bench {

/// The Redis under measurement. With FAIRSEM_BENCH_URL set, that server (compare.sh starts one
/// and runs every program against it); otherwise a private redis-server on a free loopback port,
/// stopped when the program ends.
class BenchRedis {
 public:
  /// `always_private`: a private server even when FAIRSEM_BENCH_URL is set.
  explicit BenchRedis(bool always_private = false);
  ~BenchRedis();
  BenchRedis(const BenchRedis&) = delete;
  BenchRedis& operator=(const BenchRedis&) = delete;

  /// The process-wide instance (started on first use).
  static BenchRedis& instance();
  /// A second private server (started on first use), for a control measured in the same
  /// seconds as the instance's figures.
  static BenchRedis& control();

  const std::string& url() const noexcept { return url_; }
  ConnectionOptions options() const;
  /// A connection for the harness's own commands (INFO, FLUSHALL, MEMORY USAGE).
  detail::Connection& admin();

 private:
  struct Server;
  std::unique_ptr<Server> server_;
  std::string url_;
  std::unique_ptr<detail::Connection> admin_;
};

/// Server-side counters, read with one INFO call.
struct ServerStats {
  struct Command {
    long long calls = 0;
    long long usec = 0;
  };
  std::map<std::string, Command> commands;  // commandstats, by name ("evalsha", "script|load")
  double cpu_seconds = 0;                   // used_cpu_sys + used_cpu_user of redis-server
  long long total_commands = 0;             // total_commands_processed (counts script bodies')

  static ServerStats read(detail::Connection& conn);
  /// This minus `before`, command by command.
  ServerStats since(const ServerStats& before) const;

  /// Commands a client sent (the top-level ones: scripts, blocking pops, connection set-up),
  /// leaving out the commands that ran inside scripts and the harness's own INFO.
  long long client_commands() const;
  /// Microseconds the server spent executing, by commandstats (script bodies included once,
  /// through their EVAL/EVALSHA/FCALL).
  long long client_usec() const;
  long long calls(const std::string& name) const;
  long long usec(const std::string& name) const;
  /// Calls and microseconds of the semaphore's scripts, however they ran: FCALL of the
  /// function library or EVALSHA.
  long long script_calls() const { return calls("fcall") + calls("evalsha"); }
  long long script_usec() const { return usec("fcall") + usec("evalsha"); }
};

/// True for a command name, as SLOWLOG records it, that runs a script: FCALL or EVALSHA.
inline bool is_script_call(const std::string& command) {
  return command == "FCALL" || command == "fcall" || command == "EVALSHA" || command == "evalsha";
}

/// Nearest-rank percentile (0 < p <= 100) of `values`, which it sorts. 0 when empty.
double percentile(std::vector<double>& values, double p);

/// Resident set size of this process, from /proc/self/status, in bytes.
std::int64_t resident_bytes();

/// Seconds between two steady_clock points, as double.
inline double micros(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

}  // namespace fairsem::bench
