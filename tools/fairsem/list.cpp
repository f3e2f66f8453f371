// `fairsem list`: every semaphore under a key prefix, on every master, through
// fairsem::SemaphoreAdmin::list; a semaphore with tenants shows theirs too.

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.hpp"
#include "common.hpp"
#include "status_view.hpp"

namespace fairsem::cli {

namespace {

long long units_held(const Status& s) {
  long long units = 0;
  for (const PermitInfo& p : s.holders) units += p.count;
  return units;
}

/// "-" where the server cannot tell; else "0s", "42s", "5m07s", "3h05m", "12d04h".
std::string idle_text(const SemaphoreListing& l) {
  if (!l.idle) return "-";
  const long long s = l.idle->count();
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{}h{:02}m", s / 3600, s % 3600 / 60);
  return fmt::format("{}d{:02}h", s / 86400, s % 86400 / 3600);
}

std::string list_table(const ListArgs& args, const std::vector<SemaphoreListing>& found) {
  if (found.empty()) {
    return fmt::format("no semaphore under prefix '{}' matches '{}'\n", args.key_prefix,
                       args.match);
  }
  std::size_t name_width = 4;  // "NAME"
  for (const SemaphoreListing& l : found) name_width = std::max(name_width, l.name.size());
  std::string out = fmt::format("{:<{}}  {:>6}  {:>6}  {:>7}  {:>7}  {:>8}  {}\n", "NAME",
                                name_width, "LIMIT", "HELD", "HOLDERS", "WAITING", "IDLE", "NODE");
  for (const SemaphoreListing& l : found) {
    out += fmt::format("{:<{}}  {:>6}  {:>6}  {:>7}  {:>7}  {:>8}  {}\n", l.name, name_width,
                       l.status.limit, units_held(l.status), l.status.holders.size(),
                       l.status.waiters.size(), idle_text(l), l.node);
    // A semaphore with tenants: its tenants' table under its line.
    if (has_tenants(l.status)) out += tenants_table(l.status, "    ");
  }
  return out;
}

nlohmann::ordered_json list_json(const std::vector<SemaphoreListing>& found) {
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  for (const SemaphoreListing& l : found) {
    nlohmann::ordered_json j;
    j["name"] = l.name;
    j["limit"] = l.status.limit;
    j["held"] = units_held(l.status);
    j["holders"] = l.status.holders.size();
    j["waiting"] = l.status.waiters.size();
    j["idle_seconds"] = l.idle ? nlohmann::ordered_json(l.idle->count()) : nullptr;
    j["counter"] = l.status.last_ticket;
    j["node"] = l.node;
    if (has_tenants(l.status)) j["tenants"] = tenants_json(l.status);
    all.push_back(std::move(j));
  }
  return all;
}

}  // namespace

int list_main(const ListArgs& args) {
  try {
    const Client client(ConnectionOptions::from_url(args.url));
    const std::vector<SemaphoreListing> found =
        SemaphoreAdmin::list(client, args.key_prefix, args.match);
    if (args.json) {
      fmt::print("{}\n", json_line(list_json(found)));
    } else {
      fmt::print("{}", list_table(args, found));
    }
    return 0;
  } catch (...) {
    return report_exception("fairsem list");
  }
}

}  // namespace fairsem::cli
