#include "server_build.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

namespace fairsem::test {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// Runs `binary arg` and returns what it printed to stdout and stderr.
std::string output_of(const std::string& binary, const std::string& arg) {
  int out[2];
  if (::pipe(out) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::vector<std::string> args = {binary, arg};
  std::vector<char*> argv = {args[0].data(), args[1].data(), nullptr};
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(out[0]);
    ::close(out[1]);
    throw std::runtime_error(std::string("fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(out[1], STDERR_FILENO);
    ::close(out[0]);
    ::close(out[1]);
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  ::close(out[1]);
  std::string text;
  char buf[512];
  for (;;) {
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n > 0) {
      text.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return text;
}

/// "7.2" matches "7.2" and "7.2.6", not "7.20.1".
bool version_matches(const std::string& wanted, const std::string& actual) {
  if (wanted.empty()) return true;
  return actual == wanted ||
         (actual.size() > wanted.size() && actual.compare(0, wanted.size(), wanted) == 0 &&
          actual[wanted.size()] == '.');
}

}  // namespace

std::optional<ServerBuild> parse_server_build(std::string_view version_output) {
  // "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=..."
  std::istringstream in{std::string(version_output)};
  std::string name, kind, version;
  if (!(in >> name >> kind >> version) || kind != "server" || version.rfind("v=", 0) != 0) {
    return std::nullopt;
  }
  ServerBuild build;
  build.name = lower(name);
  build.version = version.substr(2);
  char* end = nullptr;
  const long major = std::strtol(build.version.c_str(), &end, 10);
  if (end == build.version.c_str() || *end != '.') return std::nullopt;
  build.major = static_cast<int>(major);
  return build;
}

const ServerBuild& server_build(const std::string& binary) {
  static std::mutex mu;
  static std::map<std::string, ServerBuild> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(binary); it != cache.end()) return it->second;
  const std::string text = output_of(binary, "--version");
  const std::optional<ServerBuild> build = parse_server_build(text);
  if (!build) {
    throw std::runtime_error("cannot tell which server " + binary + " is: `--version` printed '" +
                             text +
                             "', not 'Redis server v=X.Y.Z ...' or 'Valkey server v=X.Y.Z ...'");
  }
  return cache.emplace(binary, *build).first->second;
}

bool accepts_enable_debug_command(const ServerBuild& build) {
  return build.name != "redis" || build.major >= 7;
}

bool accepts_cluster_port(const ServerBuild& build) {
  return build.name != "redis" || build.major >= 7;
}

ExpectedServer parse_expected_server(std::string_view text) {
  std::istringstream in{std::string(text)};
  ExpectedServer expected;
  expected.text = std::string(text);
  std::string extra;
  if (!(in >> expected.name) || (in >> expected.version && in >> extra)) {
    throw std::runtime_error("FAIRSEM_TEST_EXPECT_SERVER is '" + expected.text +
                             "': expected 'NAME [VERSION]', e.g. 'valkey 8.0.1' or 'redis 6.2.16'");
  }
  expected.name = lower(expected.name);
  return expected;
}

std::optional<ExpectedServer> expected_server() {
  const char* value = std::getenv("FAIRSEM_TEST_EXPECT_SERVER");
  if (value == nullptr || *value == '\0') return std::nullopt;
  return parse_expected_server(value);
}

std::string server_mismatch(const ExpectedServer& expected, const ServerIdentity& actual) {
  if (actual.name == expected.name && version_matches(expected.version, actual.version)) {
    return {};
  }
  std::string found = actual.name.empty() ? "an unnamed server" : actual.name;
  found += " " + (actual.version.empty() ? std::string("of unknown version") : actual.version);
  if (actual.redis_version != actual.version) {
    found += " (redis_version " + actual.redis_version + ")";
  }
  return "FAIRSEM_TEST_EXPECT_SERVER is '" + expected.text + "', but the server is " + found;
}

void check_expected_server(const ServerBuild& build, const std::string& binary) {
  const std::optional<ExpectedServer> expected = expected_server();
  if (!expected) return;
  ServerIdentity identity;
  identity.name = build.name;
  identity.version = identity.redis_version = build.version;
  const std::string why = server_mismatch(*expected, identity);
  if (!why.empty()) throw WrongServerError(why + " (" + binary + " --version)");
}

void check_expected_server(std::string_view info_server, const std::string& where) {
  const std::optional<ExpectedServer> expected = expected_server();
  if (!expected) return;
  const std::string why = server_mismatch(*expected, parse_server_identity(info_server));
  if (!why.empty()) throw WrongServerError(why + ": " + where);
}

}  // namespace fairsem::test
