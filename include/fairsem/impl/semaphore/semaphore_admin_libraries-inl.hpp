#pragma once

// SemaphoreAdmin::function_libraries() and prune_function_libraries(): the fairsem function
// libraries loaded on each master (FUNCTION LIST), and the removal of those of other versions
// (FUNCTION DELETE).

#include "fairsem/impl/config.hpp"
#include "fairsem/semaphore.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/protocol/reply.hpp"
#include "fairsem/impl/protocol/scripts.hpp"
#include "fairsem/impl/runtime/runtime.hpp"
#include "fairsem/impl/text.hpp"

namespace fairsem {

namespace function_library_helpers {

/// What each library's functions say in their description, before the version.
constexpr std::string_view kDescriptionHead = "fairsem ";

/// Whether `name` is a fairsem library's: "fairsem_" and 12 lower-case hex digits.
FAIRSEM_INLINE bool fairsem_library_name(std::string_view name) {
  constexpr std::string_view head = "fairsem_";
  if (name.size() != head.size() + 12 || !detail::starts_with(name, head)) return false;
  return std::all_of(
      name.begin() + static_cast<std::ptrdiff_t>(head.size()), name.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c)) != 0 || (c >= 'a' && c <= 'f');
      });
}

/// The value after `field` in a FUNCTION LIST entry (a flat array of field, value pairs), or
/// nullptr.
FAIRSEM_INLINE const detail::Reply* field(const detail::Reply& entry, std::string_view name) {
  const auto& items = detail::expect_array(entry, "a FUNCTION LIST entry", 0);
  for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
    if (items[i].type == detail::Reply::Type::string && items[i].str == name) return &items[i + 1];
  }
  return nullptr;
}

/// The version a library's functions record in their descriptions, or "".
FAIRSEM_INLINE std::string version_of(const detail::Reply& functions) {
  for (const detail::Reply& function : functions.elements) {
    const detail::Reply* description = field(function, "description");
    if (description == nullptr || description->type != detail::Reply::Type::string) continue;
    if (detail::starts_with(description->str, kDescriptionHead)) {
      return description->str.substr(kDescriptionHead.size());
    }
  }
  return "";
}

/// The fairsem libraries on `conn`'s node (none where the server has no functions).
FAIRSEM_INLINE std::vector<FunctionLibrary> on_node(detail::Connection& conn) {
  detail::Reply reply;
  try {
    reply = conn.command({"FUNCTION", "LIST", "LIBRARYNAME", "fairsem_*"});
  } catch (const ReplyError& e) {
    // Redis 6.2 ("unknown command"): EVALSHA only, so no library to list.
    if (detail::starts_with(e.server_message(), "ERR unknown command")) return {};
    throw;
  }
  std::vector<FunctionLibrary> out;
  for (const detail::Reply& entry : detail::expect_array(reply, "the FUNCTION LIST reply", 0)) {
    const detail::Reply* name = field(entry, "library_name");
    if (name == nullptr || name->type != detail::Reply::Type::string) {
      throw ProtocolError("fairsem: a FUNCTION LIST entry has no library_name");
    }
    if (!fairsem_library_name(name->str)) continue;  // another's library, or a user's
    FunctionLibrary library;
    library.node = conn.endpoint();
    library.name = name->str;
    library.current = name->str == detail::scripts::semaphore_library.name;
    if (const detail::Reply* functions = field(entry, "functions")) {
      detail::expect_array(*functions, "a library's functions", 0);
      library.functions = functions->elements.size();
      library.version = version_of(*functions);
    }
    out.push_back(std::move(library));
  }
  std::sort(out.begin(), out.end(), [](const FunctionLibrary& a, const FunctionLibrary& b) {
    return a.current != b.current ? a.current : a.name < b.name;
  });
  return out;
}

}  // namespace function_library_helpers

FAIRSEM_INLINE std::vector<FunctionLibrary> SemaphoreAdmin::function_libraries(
    const Client& client) {
  std::vector<FunctionLibrary> out;
  for (detail::Connection& conn : client.runtime()->master_connections()) {
    for (FunctionLibrary& library : function_library_helpers::on_node(conn)) {
      out.push_back(std::move(library));
    }
  }
  return out;
}

FAIRSEM_INLINE std::vector<FunctionLibrary> SemaphoreAdmin::prune_function_libraries(
    const Client& client, bool dry_run) {
  std::vector<FunctionLibrary> pruned;
  for (detail::Connection& conn : client.runtime()->master_connections()) {
    for (FunctionLibrary& library : function_library_helpers::on_node(conn)) {
      if (library.current) continue;
      if (!dry_run) {
        try {
          conn.command({"FUNCTION", "DELETE", library.name});
        } catch (const ReplyError& e) {
          // Deleted meanwhile (another prune): not this call's to report.
          if (e.server_message().find("not found") == std::string::npos) throw;
          continue;
        }
      }
      pruned.push_back(std::move(library));
    }
  }
  return pruned;
}

}  // namespace fairsem
