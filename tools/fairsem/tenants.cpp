// `fairsem tenant`: a semaphore's tenants and their weights (SemaphoreAdmin::status and
// set_tenant_weight), and the tenants' table and JSON that status and list show as well.

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.hpp"
#include "common.hpp"
#include "status_view.hpp"

namespace fairsem::cli {

bool has_tenants(const Status& s) {
  return std::any_of(s.tenants.begin(), s.tenants.end(),
                     [](const TenantStatus& t) { return !t.name.empty() || t.weight != 1; });
}

std::string tenant_text(const std::string& tenant) {
  return tenant.empty() ? std::string("(default)") : printable(tenant);
}

std::string tenants_table(const Status& s, const std::string& indent) {
  std::size_t name_width = 6;  // "TENANT"
  for (const TenantStatus& t : s.tenants) {
    name_width = std::max(name_width, tenant_text(t.name).size());
  }
  std::string out =
      fmt::format("{}{:<{}}  {:>6}  {:>6}  {:>7}  {:>7}  {:>7}  {:>11}\n", indent, "TENANT",
                  name_width, "WEIGHT", "HELD", "HOLDERS", "WAITING", "WAITERS", "OLDEST WAIT");
  for (const TenantStatus& t : s.tenants) {
    out += fmt::format("{}{:<{}}  {:>6}  {:>6}  {:>7}  {:>7}  {:>7}  {:>11}\n", indent,
                       tenant_text(t.name), name_width, t.weight, t.held, t.holders, t.waiting,
                       t.waiters, t.oldest_wait ? format_duration(*t.oldest_wait) : "-");
  }
  return out;
}

nlohmann::ordered_json tenants_json(const Status& s) {
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  for (const TenantStatus& t : s.tenants) {
    nlohmann::ordered_json j;
    j["name"] = t.name;
    j["weight"] = t.weight;
    j["held"] = t.held;
    j["holders"] = t.holders;
    j["waiting"] = t.waiting;
    j["waiters"] = t.waiters;
    j["oldest_wait_ms"] = t.oldest_wait ? nlohmann::ordered_json(t.oldest_wait->count()) : nullptr;
    all.push_back(std::move(j));
  }
  return all;
}

namespace {

void show_tenants(const TenantArgs& args, const Status& s) {
  if (args.json) {
    nlohmann::ordered_json j;
    j["name"] = args.target.name;
    j["limit"] = s.limit;
    j["tenants"] = tenants_json(s);
    fmt::print("{}\n", json_line(j));
    return;
  }
  if (s.tenants.empty()) {
    fmt::print("semaphore '{}' (prefix '{}'): no tenant holds, waits or has a weight stored\n",
               args.target.name, args.target.key_prefix);
    return;
  }
  fmt::print("semaphore '{}' (prefix '{}'): limit {}, {} tenant{}\n{}", args.target.name,
             args.target.key_prefix, s.limit, s.tenants.size(), s.tenants.size() == 1 ? "" : "s",
             tenants_table(s, "  "));
}

void print_set(const TenantArgs& args, const std::string& tenant, long long old_weight) {
  if (args.json) {
    nlohmann::ordered_json j;
    j["name"] = args.target.name;
    j["tenant"] = tenant;
    j["old_weight"] = old_weight;
    j["weight"] = args.weight;
    fmt::print("{}\n", json_line(j));
    return;
  }
  fmt::print("tenant {} of {}: weight {} -> {}{}\n", tenant_text(tenant), args.target.name,
             old_weight, args.weight, old_weight == args.weight ? " (unchanged)" : "");
}

}  // namespace

int tenant_main(const TenantArgs& args) {
  try {
    SemaphoreAdmin admin(ConnectionOptions::from_url(args.target.url), args.target.name,
                         args.target.key_prefix);
    if (args.tenant) {
      print_set(args, *args.tenant, admin.set_tenant_weight(*args.tenant, args.weight));
    } else {
      show_tenants(args, admin.status());
    }
    return 0;
  } catch (...) {
    return report_exception("fairsem tenant");
  }
}

}  // namespace fairsem::cli
