// `fairsem status`, `fairsem evict` and `fairsem resize`: read and edit a semaphore known only
// by name (Redis stores its limit), through fairsem::SemaphoreAdmin.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "commands.hpp"
#include "common.hpp"
#include "status_view.hpp"

namespace fairsem::cli {

namespace {

nlohmann::ordered_json to_json(const PermitInfo& p, bool holder, bool tenants) {
  nlohmann::ordered_json j;
  j["id"] = p.id;
  j["token"] = p.ticket;
  j["units"] = p.count;
  j["slot"] = holder ? nlohmann::ordered_json(p.slot) : nlohmann::ordered_json(nullptr);
  j["slots"] = p.slots;
  j["lease_left_ms"] = p.lease_left.count();
  // How long a waiter has waited, by the server's clock; null for a holder, and for a waiter
  // whose client does not record when it queued (0.3.1 or earlier).
  j["waited_ms"] = p.waited ? nlohmann::ordered_json(p.waited->count()) : nullptr;
  if (tenants) j["tenant"] = p.tenant;
  j["owner"] = p.owner;
  return j;
}

/// A holder's slots as the first column shows them: "3", or "0,2,5" for a permit of 3 units.
std::string slot_list(const PermitInfo& p) { return fmt::format("{}", fmt::join(p.slots, ",")); }

/// The first column's width and the id column's, shared by both tables so that they line up.
struct Widths {
  std::size_t first = 4;   // "SLOT"
  std::size_t id = 2;      // "ID"
  std::size_t tenant = 0;  // "TENANT"; 0: no such column (the semaphore has no tenants)
};

Widths widths_of(const Status& s) {
  Widths w;
  for (const auto* rows : {&s.holders, &s.waiters}) {
    for (const PermitInfo& p : *rows) w.id = std::max(w.id, p.id.size());
  }
  for (const PermitInfo& p : s.holders) w.first = std::max(w.first, slot_list(p).size());
  w.first = std::max(w.first, std::to_string(s.waiters.size()).size());
  if (has_tenants(s)) {
    w.tenant = 6;
    for (const auto* rows : {&s.holders, &s.waiters}) {
      for (const PermitInfo& p : *rows) w.tenant = std::max(w.tenant, tenant_text(p.tenant).size());
    }
  }
  return w;
}

/// One table: the first column is the slots (holders) or the place in the queue (waiters).
void append_table(std::string& out, const std::string& title, const std::vector<PermitInfo>& rows,
                  bool holders, const Widths& widths) {
  if (rows.empty()) return;
  const std::string first_label = holders ? "SLOT" : "#";
  const std::size_t first_width = widths.first;
  const std::size_t id_width = widths.id;
  std::vector<std::string> first;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    first.push_back(holders ? slot_list(rows[i]) : std::to_string(i + 1));
  }
  // Waiters have one more column: how long each has waited ("-": not recorded).
  const auto waited = [&](const PermitInfo& p) {
    if (holders) return std::string();
    return fmt::format("{:>10}  ", p.waited ? format_duration(*p.waited) : std::string("-"));
  };
  // With tenants, one more: whose entry it is.
  const auto tenant = [&](const std::string& text) {
    return widths.tenant == 0 ? std::string() : fmt::format("{:<{}}  ", text, widths.tenant);
  };
  out += fmt::format("{}\n", title);
  out += fmt::format("  {:>{}}  {:<{}}  {:>8}  {:>5}  {:>10}  {}{}OWNER\n", first_label,
                     first_width, "ID", id_width, "TOKEN", "UNITS", "LEASE LEFT",
                     holders ? "" : fmt::format("{:>10}  ", "WAITED"), tenant("TENANT"));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const PermitInfo& p = rows[i];
    // Owner info is whatever a client stored: a newline or an escape sequence in it is shown as
    // \xNN rather than sent to the terminal.
    out += fmt::format("  {:>{}}  {:<{}}  {:>8}  {:>5}  {:>10}  {}{}{}\n", first[i], first_width,
                       p.id, id_width, p.ticket, p.count, format_duration(p.lease_left), waited(p),
                       tenant(tenant_text(p.tenant)), printable(p.owner));
  }
}

}  // namespace

std::string status_table(const Target& target, const Status& s) {
  if (s.limit == 0 && s.holders.empty() && s.waiters.empty()) {
    std::string out =
        fmt::format("semaphore '{}' (prefix '{}'): not in use (no limit stored, nobody queued)\n",
                    target.name, target.key_prefix);
    // Weights may be stored before the first request.
    if (has_tenants(s)) out += "tenants:\n" + tenants_table(s, "  ");
    return out;
  }
  long long units = 0;
  for (const PermitInfo& p : s.holders) units += p.count;
  std::string out = fmt::format(
      // "newest token", not "tickets issued": with an idle expiry a counter starts from the
      // server clock (docs/guarantees.md), and counts nothing.
      "semaphore '{}' (prefix '{}'): limit {}, {} holding {} unit{}, {} waiting, newest token "
      "{}\n",
      target.name, target.key_prefix, s.limit, s.holders.size(), units, units == 1 ? "" : "s",
      s.waiters.size(), s.last_ticket);
  if (has_tenants(s))
    out += "tenants (weighted fair queuing between them):\n" + tenants_table(s, "  ");
  const Widths widths = widths_of(s);
  append_table(out, "holders:", s.holders, true, widths);
  append_table(out, "waiters, in queue order:", s.waiters, false, widths);
  return out;
}

nlohmann::ordered_json status_json(const Target& target, const Status& s) {
  nlohmann::ordered_json j;
  j["name"] = target.name;
  j["limit"] = s.limit;
  j["counter"] = s.last_ticket;
  j["holders"] = nlohmann::ordered_json::array();
  const bool tenants = has_tenants(s);
  for (const PermitInfo& p : s.holders) j["holders"].push_back(to_json(p, true, tenants));
  j["waiters"] = nlohmann::ordered_json::array();
  for (const PermitInfo& p : s.waiters) j["waiters"].push_back(to_json(p, false, tenants));
  if (tenants) j["tenants"] = tenants_json(s);
  return j;
}

std::string json_line(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int status_main(const StatusArgs& args) {
  if (args.watch) return watch_main(args);
  try {
    SemaphoreAdmin admin(ConnectionOptions::from_url(args.target.url), args.target.name,
                         args.target.key_prefix);
    const Status s = admin.status();
    if (args.json) {
      fmt::print("{}\n", json_line(status_json(args.target, s)));
    } else {
      fmt::print("{}", status_table(args.target, s));
    }
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

namespace {

/// NEW_LIMIT: digits only (no sign, space or exponent), 1 to 10^9. A URL typed there is quoted
/// without its credentials.
long long parse_limit(const std::string& text) {
  const auto bad = [&] {
    const std::string shown =
        text.find("://") == std::string::npos ? text : fairsem::redact_url(text);
    return InvalidArgument(
        fmt::format("NEW_LIMIT \"{}\" is not a whole number from 1 to {}", shown, kMaxLimit));
  };
  if (text.empty() || text.size() > 10) throw bad();
  long long value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') throw bad();
    value = value * 10 + (c - '0');
  }
  if (value < 1 || value > kMaxLimit) throw bad();
  return value;
}

std::string describe(const ResizeResult& r) {
  if (r.old_limit == 0) {
    return fmt::format("limit (none stored) -> {} (the semaphore was not in use)", r.new_limit);
  }
  const std::string change = fmt::format("limit {} -> {}", r.old_limit, r.new_limit);
  if (r.new_limit == r.old_limit) return change + " (unchanged)";
  if (r.new_limit > r.old_limit) {
    return fmt::format("{} ({} waiter{} granted)", change, r.promoted, r.promoted == 1 ? "" : "s");
  }
  return fmt::format("{} (holders keep their permits; none is granted until fewer than {} hold)",
                     change, r.new_limit);
}

}  // namespace

int resize_main(const ResizeArgs& args) {
  try {
    const long long new_limit = parse_limit(args.new_limit);
    SemaphoreAdmin admin(ConnectionOptions::from_url(args.target.url), args.target.name,
                         args.target.key_prefix);
    fmt::print("resized {}: {}\n", args.target.name, describe(admin.resize(new_limit)));
    return 0;
  } catch (...) {
    return report_exception("fairsem resize");
  }
}

}  // namespace fairsem::cli
