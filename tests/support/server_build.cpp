#include "server_build.hpp"

#include <cctype>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

#include "run_captured.hpp"

namespace fairsem::test {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
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
  const std::string text = run_captured({binary, "--version"}, std::chrono::seconds(30)).output;
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
