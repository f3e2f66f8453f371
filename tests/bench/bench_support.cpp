#include "bench_support.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "redis_server.hpp"

namespace fairsem::bench {

struct BenchRedis::Server {
  test::RedisServer redis;
};

BenchRedis::BenchRedis(bool always_private) {
  const char* url = std::getenv("FAIRSEM_BENCH_URL");
  if (!always_private && url != nullptr && *url != '\0') {
    url_ = url;
  } else {
    server_ = std::make_unique<Server>();
    url_ = server_->redis.url();
  }
}

BenchRedis::~BenchRedis() = default;

BenchRedis& BenchRedis::instance() {
  static BenchRedis redis;
  return redis;
}

BenchRedis& BenchRedis::control() {
  static BenchRedis redis(true);
  return redis;
}

ConnectionOptions BenchRedis::options() const {
  ConnectionOptions o = ConnectionOptions::from_url(url_);
  o.command_timeout = std::chrono::seconds(30);  // FLUSHALL and big queues take a while
  return o;
}

detail::Connection& BenchRedis::admin() {
  if (!admin_) admin_ = std::make_unique<detail::Connection>(options());
  return *admin_;
}

namespace {

long long field(const std::string& text, const std::string& name) {
  const auto at = text.find(name + "=");
  if (at == std::string::npos) return 0;
  return std::strtoll(text.c_str() + at + name.size() + 1, nullptr, 10);
}

// What a client sends itself. Everything else in commandstats ran inside a script (or is the
// harness's INFO): those are counted in total_commands, not as client commands.
const std::set<std::string>& client_command_names() {
  static const std::set<std::string> names = {
      "eval",        "evalsha",       "eval_ro",        "evalsha_ro",     "fcall",    "fcall_ro",
      "brpop",       "blpop",         "blmove",         "brpoplpush",     "bzpopmin", "bzpopmax",
      "ping",        "select",        "auth",           "hello",          "multi",    "exec",
      "script|load", "script|exists", "client|setname", "client|setinfo", "client|id"};
  return names;
}

}  // namespace

ServerStats ServerStats::read(detail::Connection& conn) {
  const detail::Reply reply = conn.command({"INFO", "commandstats", "cpu", "stats"});
  ServerStats s;
  std::istringstream in(reply.str);
  std::string line;
  double sys = 0;
  double user = 0;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("cmdstat_", 0) == 0) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      Command c;
      c.calls = field(line, "calls");
      c.usec = field(line, "usec");
      s.commands[line.substr(8, colon - 8)] = c;
    } else if (line.rfind("used_cpu_sys:", 0) == 0) {
      sys = std::strtod(line.c_str() + 13, nullptr);
    } else if (line.rfind("used_cpu_user:", 0) == 0) {
      user = std::strtod(line.c_str() + 14, nullptr);
    } else if (line.rfind("total_commands_processed:", 0) == 0) {
      s.total_commands = std::strtoll(line.c_str() + 25, nullptr, 10);
    }
  }
  s.cpu_seconds = sys + user;
  return s;
}

ServerStats ServerStats::since(const ServerStats& before) const {
  ServerStats d;
  for (const auto& [name, c] : commands) {
    Command b;
    if (auto it = before.commands.find(name); it != before.commands.end()) b = it->second;
    Command x{c.calls - b.calls, c.usec - b.usec};
    if (x.calls != 0 || x.usec != 0) d.commands[name] = x;
  }
  d.cpu_seconds = cpu_seconds - before.cpu_seconds;
  // The INFO that read `this` is counted by total_commands_processed only after it ran.
  d.total_commands = total_commands - before.total_commands - 1;
  return d;
}

long long ServerStats::client_commands() const {
  long long n = 0;
  for (const auto& [name, c] : commands) {
    if (client_command_names().count(name) != 0) n += c.calls;
  }
  return n;
}

long long ServerStats::client_usec() const {
  long long n = 0;
  for (const auto& [name, c] : commands) {
    if (client_command_names().count(name) != 0) n += c.usec;
  }
  return n;
}

long long ServerStats::calls(const std::string& name) const {
  auto it = commands.find(name);
  return it == commands.end() ? 0 : it->second.calls;
}

long long ServerStats::usec(const std::string& name) const {
  auto it = commands.find(name);
  return it == commands.end() ? 0 : it->second.usec;
}

double percentile(std::vector<double>& values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  rank = std::clamp<std::size_t>(rank, 1, values.size());
  return values[rank - 1];
}

std::int64_t resident_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoll(line.c_str() + 6, nullptr, 10) * 1024;
  }
  return -1;
}

}  // namespace fairsem::bench
