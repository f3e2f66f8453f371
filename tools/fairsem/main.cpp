// fairsem: the command-line face of the library. Caps how many copies of a command run at once
// across machines (`run`), shows and edits a semaphore (`status`, `evict`, `resize`, `tenant`),
// lists every semaphore of a deployment (`list`), manages the function libraries fairsem loads
// (`functions`), and demonstrates the guarantees on a private Redis (`demo`).

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <fairsem/fairsem.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "args.hpp"
#include "command_line.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace {

using fairsem::args::hide_credentials;
using fairsem::args::resolve_url;
using fairsem::cli::add_commands;
using fairsem::cli::CommandLine;
using fairsem::cli::report_exception;
using fairsem::cli::usage_error;

/// Parses argv[1..parsed_argc) (what comes before "--") into `cl`. Returns nullopt to go on, or
/// the exit code: 0 after --help or --version, 64 after a bad argument.
std::optional<int> parse(CommandLine& cl, int argc, char** argv, int parsed_argc,
                         bool has_separator) {
  const std::string first = parsed_argc > 1 ? argv[1] : "";
  std::vector<std::string> known;  // the subcommands, in the order add_commands() adds them
  for (const CLI::App* sub : cl.app.get_subcommands([](const CLI::App*) { return true; })) {
    known.push_back(sub->get_name());
  }
  if (!first.empty() && first[0] != '-' &&
      std::find(known.begin(), known.end(), first) == known.end()) {
    const std::string last = known.back();
    known.pop_back();
    return usage_error("fairsem",
                       hide_credentials(fmt::format("unknown command '{}' (use {} or {})", argv[1],
                                                    fmt::join(known, ", "), last),
                                        argc, argv));
  }
  try {
    std::vector<std::string> args(argv + 1, argv + parsed_argc);
    std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector
    cl.app.parse(args);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return cl.app.exit(e);  // --help, --version
    std::string where = "fairsem";
    for (const CLI::App* sub : cl.app.get_subcommands()) where += " " + sub->get_name();
    const std::string message = hide_credentials(e.what(), argc, argv);
    if (cl.run_cmd->parsed() && !has_separator && dynamic_cast<const CLI::ExtrasError*>(&e)) {
      return usage_error(where, fmt::format("{} (is '--' missing before the command?)", message));
    }
    return usage_error(where, message);
  }
  return std::nullopt;
}

int start_run(CommandLine& cl, std::vector<std::string> command, bool has_separator) {
  if (!has_separator) {
    return usage_error("fairsem run",
                       "missing '--' before the command (fairsem run ... -- CMD [ARG...])");
  }
  if (command.empty()) return usage_error("fairsem run", "no command after '--'");
  try {
    cl.run.target.url = resolve_url(cl.run_url);
    cl.run.lease = fairsem::cli::parse_duration(cl.lease_text, "--lease");
    if (cl.run.lease.count() == 0) throw fairsem::InvalidArgument("--lease must be positive");
    if (!cl.wait_text.empty()) cl.run.wait = fairsem::cli::parse_duration(cl.wait_text, "--wait");
    cl.run.idle_expiry = fairsem::cli::parse_duration(cl.idle_expiry_text, "--idle-expiry");
    cl.run.kill_on_lost = cl.on_lost == "kill";
    cl.run.command = std::move(command);
  } catch (...) {
    return report_exception("fairsem run");
  }
  return fairsem::cli::run_main(cl.run);
}

int start_status(CommandLine& cl) {
  if (cl.watch_opt->count() > 0) {
    try {
      if (cl.watch_text.empty()) {
        cl.status.watch = std::chrono::seconds(1);
      } else {
        cl.status.watch = fairsem::cli::parse_duration(cl.watch_text, "--watch");
        if (cl.status.watch->count() == 0) {
          throw fairsem::InvalidArgument(
              fmt::format("--watch \"{}\": the interval must be positive", cl.watch_text));
        }
      }
    } catch (...) {
      return report_exception("fairsem status");
    }
  }
  cl.status.target.url = resolve_url(cl.status_url);
  return fairsem::cli::status_main(cl.status);
}

int start_resize(CommandLine& cl) {
  // A positional NAME invites `fairsem resize URL N`: refuse it rather than resize a
  // semaphore named after the URL and print its password.
  if (cl.resize.target.name.find("://") != std::string::npos) {
    return usage_error("fairsem resize",
                       fmt::format("NAME \"{}\" looks like a Redis URL; give the URL with --url",
                                   fairsem::redact_url(cl.resize.target.name)));
  }
  cl.resize.target.url = resolve_url(cl.resize_url);
  return fairsem::cli::resize_main(cl.resize);
}

int start_tenant(CommandLine& cl) {
  if (cl.tenant.target.name.find("://") != std::string::npos) {
    return usage_error("fairsem tenant",
                       fmt::format("NAME \"{}\" looks like a Redis URL; give the URL with --url",
                                   fairsem::redact_url(cl.tenant.target.name)));
  }
  if (cl.tenant_opt->count() > 0 && cl.weight_opt->count() == 0) {
    return usage_error("fairsem tenant",
                       fmt::format("WEIGHT is missing after TENANT \"{}\" (fairsem tenant NAME "
                                   "[TENANT WEIGHT])",
                                   fairsem::printable(cl.tenant_name)));
  }
  if (cl.tenant_opt->count() > 0) cl.tenant.tenant = cl.tenant_name;
  cl.tenant.target.url = resolve_url(cl.tenant_url);
  return fairsem::cli::tenant_main(cl.tenant);
}

int start_exporter(CommandLine& cl) {
#if FAIRSEM_CLI_EXPORTER
  try {
    cl.exporter.scrape_timeout =
        fairsem::cli::parse_duration(cl.scrape_timeout, "--scrape-timeout");
    if (cl.exporter.scrape_timeout.count() == 0) {
      throw fairsem::InvalidArgument("--scrape-timeout must be positive");
    }
  } catch (...) {
    return report_exception("fairsem exporter");
  }
  cl.exporter.url = resolve_url(cl.exporter.url);
  return fairsem::cli::exporter_main(cl.exporter);
#else
  (void)cl;
  return usage_error("fairsem exporter",
                     "this fairsem was built without prometheus-cpp (FAIRSEM_PROMETHEUS); "
                     "install prometheus-cpp-dev and build it again");
#endif
}

int start_demo(CommandLine& cl) {
  try {
    cl.demo.lease = fairsem::cli::parse_duration(cl.demo_lease, "--lease");
  } catch (...) {
    return report_exception("fairsem demo");
  }
  return fairsem::cli::demo_main(cl.demo);
}

int fairsem_main(int argc, char** argv) {
  // `run` takes its command after "--", verbatim; CLI11 sees only what comes before it.
  std::vector<std::string> command;
  int parsed_argc = argc;
  bool has_separator = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      has_separator = true;
      parsed_argc = i;
      command.assign(argv + i + 1, argv + argc);
      break;
    }
  }

  CommandLine cl;
  add_commands(cl);
  if (const auto exit_code = parse(cl, argc, argv, parsed_argc, has_separator)) return *exit_code;

  if (cl.run_cmd->parsed()) return start_run(cl, std::move(command), has_separator);
  if (has_separator) return usage_error("fairsem", "'--' is only for `fairsem run`");
  if (cl.status_cmd->parsed()) return start_status(cl);
  if (cl.list_cmd->parsed()) {
    cl.list.url = resolve_url(cl.list.url);
    return fairsem::cli::list_main(cl.list);
  }
  if (cl.functions_cmd->parsed()) {
    cl.functions.url = resolve_url(cl.functions.url);
    return fairsem::cli::functions_main(cl.functions);
  }
  if (cl.exporter_cmd->parsed()) return start_exporter(cl);
  if (cl.evict_cmd->parsed()) {
    cl.evict.target.url = resolve_url(cl.evict_url);
    return fairsem::cli::evict_main(cl.evict);
  }
  if (cl.resize_cmd->parsed()) return start_resize(cl);
  if (cl.tenant_cmd->parsed()) return start_tenant(cl);
  return start_demo(cl);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return fairsem_main(argc, argv);
  } catch (...) {
    // Whatever a subcommand did not catch itself (CLI11 refusing an option, std::bad_alloc).
    return report_exception("fairsem");
  }
}
