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
/// "slot" null for a waiter.
nlohmann::ordered_json status_json(const Target& target, const Status& s);

/// One line of JSON (no '\n'). Ids and owner info are bytes: what is not UTF-8 is replaced
/// rather than refused.
std::string json_line(const nlohmann::ordered_json& j);

}  // namespace fairsem::cli
