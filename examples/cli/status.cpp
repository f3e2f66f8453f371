// `fairsem status` and `fairsem evict`: read and edit a semaphore known only by name (Redis
// stores its limit), through fairsem::SemaphoreAdmin.

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.hpp"
#include "common.hpp"

namespace fairsem::cli {

namespace {

nlohmann::ordered_json to_json(const PermitInfo& p) {
  nlohmann::ordered_json j;
  j["id"] = p.id;
  j["token"] = p.ticket;
  j["lease_left_ms"] = p.lease_left.count();
  j["owner"] = p.owner;
  return j;
}

void print_table(const std::string& title, const std::vector<PermitInfo>& rows, bool numbered) {
  if (rows.empty()) return;
  std::size_t id_width = 2;
  for (const PermitInfo& p : rows) id_width = std::max(id_width, p.id.size());
  fmt::print("{}\n", title);
  fmt::print("  {}{:<{}}  {:>8}  {:>10}  {}\n", numbered ? "  # " : "", "ID", id_width, "TOKEN",
             "LEASE LEFT", "OWNER");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const PermitInfo& p = rows[i];
    fmt::print("  {}{:<{}}  {:>8}  {:>10}  {}\n", numbered ? fmt::format("{:>3} ", i + 1) : "",
               p.id, id_width, p.ticket, format_duration(p.lease_left), p.owner);
  }
}

}  // namespace

int status_main(const StatusArgs& args) {
  try {
    SemaphoreAdmin admin(ConnectionOptions::from_url(args.target.url), args.target.name,
                         args.target.key_prefix);
    const Status s = admin.status();
    if (args.json) {
      nlohmann::ordered_json j;
      j["name"] = args.target.name;
      j["limit"] = s.limit;
      j["counter"] = s.last_ticket;
      j["holders"] = nlohmann::ordered_json::array();
      for (const PermitInfo& p : s.holders) j["holders"].push_back(to_json(p));
      j["waiters"] = nlohmann::ordered_json::array();
      for (const PermitInfo& p : s.waiters) j["waiters"].push_back(to_json(p));
      // Ids and owner info are bytes; replace what is not UTF-8 rather than fail.
      fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      return 0;
    }
    if (s.limit == 0 && s.holders.empty() && s.waiters.empty()) {
      fmt::print("semaphore '{}' (prefix '{}'): not in use (no limit stored, nobody queued)\n",
                 args.target.name, args.target.key_prefix);
      return 0;
    }
    fmt::print(
        "semaphore '{}' (prefix '{}'): limit {}, {} holding, {} waiting, {} tickets issued\n",
        args.target.name, args.target.key_prefix, s.limit, s.holders.size(), s.waiters.size(),
        s.last_ticket);
    print_table("holders:", s.holders, false);
    print_table("waiters, in queue order:", s.waiters, true);
    return 0;
  } catch (...) {
    return report_exception("fairsem status");
  }
}

int evict_main(const EvictArgs& args) {
  try {
    SemaphoreAdmin admin(ConnectionOptions::from_url(args.target.url), args.target.name,
                         args.target.key_prefix);
    switch (admin.evict(args.id)) {
      case EvictResult::holder:
        fmt::print("evicted holder {} of semaphore '{}': its permit passed on\n", args.id,
                   args.target.name);
        return 0;
      case EvictResult::waiter:
        fmt::print("evicted waiter {} of semaphore '{}'\n", args.id, args.target.name);
        return 0;
      case EvictResult::already_evicted:
        fmt::print("permit {} of semaphore '{}' was evicted already\n", args.id, args.target.name);
        return 0;
      case EvictResult::not_found:
        break;
    }
    fmt::print(stderr,
               "fairsem evict: semaphore '{}' has no permit {} (released, expired, or "
               "never there)\n",
               args.target.name, args.id);
    return 1;
  } catch (...) {
    return report_exception("fairsem evict");
  }
}

}  // namespace fairsem::cli
