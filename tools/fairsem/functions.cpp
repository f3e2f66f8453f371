// `fairsem functions list|prune`: the fairsem function libraries loaded on each master, and the
// removal of other versions' (fairsem::SemaphoreAdmin::function_libraries and
// prune_function_libraries).

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

std::string version_text(const FunctionLibrary& l) {
  return l.version.empty() ? "unknown" : l.version;
}

std::string libraries_table(const std::vector<FunctionLibrary>& found) {
  if (found.empty()) return "no fairsem function library is loaded\n";
  std::size_t node_width = 4;  // "NODE"
  for (const FunctionLibrary& l : found) node_width = std::max(node_width, l.node.size());
  std::string out = fmt::format("{:<{}}  {:<20}  {:<9}  {:>9}\n", "NODE", node_width, "LIBRARY",
                                "VERSION", "FUNCTIONS");
  for (const FunctionLibrary& l : found) {
    out += fmt::format("{:<{}}  {:<20}  {:<9}  {:>9}{}\n", l.node, node_width, l.name,
                       version_text(l), l.functions, l.current ? "  (this version's)" : "");
  }
  return out;
}

std::string prune_text(const FunctionsArgs& args, const std::vector<FunctionLibrary>& pruned) {
  std::string out;
  for (const FunctionLibrary& l : pruned) {
    out += fmt::format("{} {} (version {}) on {}\n", args.dry_run ? "would delete" : "deleted",
                       l.name, version_text(l), l.node);
  }
  out += fmt::format("{} librar{} {}; this version's library kept\n", pruned.size(),
                     pruned.size() == 1 ? "y" : "ies", args.dry_run ? "to delete" : "deleted");
  return out;
}

nlohmann::ordered_json libraries_json(const std::vector<FunctionLibrary>& found) {
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  for (const FunctionLibrary& l : found) {
    nlohmann::ordered_json j;
    j["node"] = l.node;
    j["library"] = l.name;
    j["version"] =
        l.version.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(l.version);
    j["functions"] = l.functions;
    j["current"] = l.current;
    all.push_back(std::move(j));
  }
  return all;
}

}  // namespace

int functions_main(const FunctionsArgs& args) {
  const std::string command = "fairsem functions " + args.action;
  try {
    const Client client(ConnectionOptions::from_url(args.url));
    if (args.action == "list") {
      const std::vector<FunctionLibrary> found = SemaphoreAdmin::function_libraries(client);
      fmt::print("{}",
                 args.json ? json_line(libraries_json(found)) + "\n" : libraries_table(found));
      return 0;
    }
    const std::vector<FunctionLibrary> pruned =
        SemaphoreAdmin::prune_function_libraries(client, args.dry_run);
    fmt::print("{}",
               args.json ? json_line(libraries_json(pruned)) + "\n" : prune_text(args, pruned));
    return 0;
  } catch (...) {
    return report_exception(command);
  }
}

}  // namespace fairsem::cli
