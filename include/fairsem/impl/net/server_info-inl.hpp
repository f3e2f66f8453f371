#pragma once

#include "fairsem/impl/config.hpp"
#include "fairsem/server_info.hpp"

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/protocol/replies.hpp"
#include "fairsem/impl/protocol/server_support.hpp"
#include "fairsem/impl/text.hpp"

namespace fairsem {
namespace server_info_helpers {

FAIRSEM_INLINE std::string info_field(std::string_view info, std::string_view field) {
  const std::string key = std::string(field) + ":";
  std::size_t pos = 0;
  while (pos < info.size()) {
    std::size_t eol = info.find('\n', pos);
    if (eol == std::string::npos) eol = info.size();
    std::string_view line = info.substr(pos, eol - pos);
    if (detail::starts_with(line, key)) {
      line.remove_prefix(key.size());
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      return std::string(line);
    }
    pos = eol + 1;
  }
  return {};
}

template <class F>
std::vector<std::chrono::nanoseconds> time_calls(int n, F&& call) {
  std::vector<std::chrono::nanoseconds> out;
  out.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    auto start = std::chrono::steady_clock::now();
    call();
    out.push_back(std::chrono::steady_clock::now() - start);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace server_info_helpers

FAIRSEM_INLINE ServerIdentity parse_server_identity(std::string_view info) {
  ServerIdentity id;
  id.redis_version = server_info_helpers::info_field(info, "redis_version");
  id.name = server_info_helpers::info_field(info, "server_name");
  if (!id.name.empty()) id.version = server_info_helpers::info_field(info, id.name + "_version");
  if (id.name.empty() && !id.redis_version.empty()) id.name = "redis";
  if (id.version.empty()) id.version = id.redis_version;
  id.mode = server_info_helpers::info_field(info, "redis_mode");
  if (id.mode.empty()) id.mode = server_info_helpers::info_field(info, "server_mode");
  return id;
}

namespace detail {

FAIRSEM_INLINE std::string describe_server(Connection& conn) noexcept {
  try {
    try {
      const ServerIdentity id = parse_server_identity(
          expect_string(conn.command({"INFO", "server"}), "the INFO server reply"));
      if (id.name.empty() || id.version.empty()) return "a server INFO server does not name";
      std::string name = id.name;
      name[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(name[0])));
      return name + " " + id.version;
    } catch (const ReplyError& e) {
      return "of a version fairsem could not read (INFO server: " + e.server_message() + ")";
    } catch (const std::exception& e) {
      return std::string("of a version fairsem could not read (INFO server: ") + e.what() + ")";
    }
  } catch (...) {
    return "of a version fairsem could not read";
  }
}

}  // namespace detail

FAIRSEM_INLINE ServerInfo probe_server(const ConnectionOptions& options, int samples) {
  if (samples < 1) {
    throw InvalidArgument(fmt::format("fairsem: probe_server needs samples >= 1, got {}", samples));
  }
  detail::Connection conn(options);
  ServerInfo info;
  info.endpoint = conn.endpoint();
  info.samples = samples;

  const std::string text =
      detail::expect_string(conn.command({"INFO", "server"}), "the INFO server reply");
  ServerIdentity id = parse_server_identity(text);
  info.server_name = std::move(id.name);
  info.server_version = std::move(id.version);
  info.redis_version = std::move(id.redis_version);
  info.redis_mode = std::move(id.mode);

  const auto before = std::chrono::system_clock::now();
  const auto ms = detail::decode_server_clock(conn.eval(detail::scripts::server_clock, {}, {}));
  const auto after = std::chrono::system_clock::now();
  info.server_time = std::chrono::system_clock::time_point(ms);
  info.clock_offset = std::chrono::duration_cast<std::chrono::milliseconds>(
      info.server_time - (before + (after - before) / 2));

  auto pings = server_info_helpers::time_calls(samples, [&] { conn.command({"PING"}); });
  info.ping_min = pings.front();
  info.ping_median = pings[pings.size() / 2];
  auto evals = server_info_helpers::time_calls(
      samples, [&] { conn.eval(detail::scripts::server_clock, {}, {}); });
  info.script_median = evals[evals.size() / 2];
  return info;
}

}  // namespace fairsem
