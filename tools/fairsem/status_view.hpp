#pragma once

// What `fairsem status` shows, as text: the table and the --json object, shared by one-shot
// status and --watch.

#include <fairsem/fairsem.hpp>

#include <nlohmann/json.hpp>
#include <string>

#include "commands.hpp"

namespace fairsem::cli {

/// The summary line and the holders and waiters tables, each line ending in '\n'.
std::string status_table(const Target& target, const Status& s);

/// {"name","limit","counter","holders":[...],"waiters":[...]}; every entry has the same keys,
/// "slot" null for a waiter. With tenants (has_tenants), each entry has its "tenant" too, and
/// "tenants" (tenants_json) follows.
nlohmann::ordered_json status_json(const Target& target, const Status& s);

/// Whether `s` has tenants to show: one other than the default tenant (""), or a stored weight.
/// Without them, status, list and the exporter show what they showed before tenants existed.
bool has_tenants(const Status& s);

/// A tenant's name in a table: "(default)" for "", else as printable() shows it.
std::string tenant_text(const std::string& tenant);

/// The tenants' table (TENANT, WEIGHT, HELD, HOLDERS, WAITING, WAITERS, OLDEST WAIT; held and
/// waiting in units), each line starting with `indent` and ending in '\n'.
std::string tenants_table(const Status& s, const std::string& indent);

/// [{"name","weight","held","holders","waiting","waiters","oldest_wait_ms"}...], in name order;
/// "waiting" in units, "oldest_wait_ms" null when no waiter's time is known.
nlohmann::ordered_json tenants_json(const Status& s);

/// One line of JSON (no '\n'). Ids and owner info are bytes: what is not UTF-8 is replaced
/// rather than refused.
std::string json_line(const nlohmann::ordered_json& j);

}  // namespace fairsem::cli
