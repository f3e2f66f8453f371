#pragma once

// The `fairsem` command line as CLI11 takes it apart: each subcommand's options and help
// (command_line.cpp); main.cpp parses, checks what CLI11 cannot, and starts the subcommand.

#include <CLI/CLI.hpp>

#include <string>

#include "commands.hpp"

namespace fairsem::cli {

/// The command line as CLI11 takes it apart: every subcommand's arguments (as typed where they
/// are checked after parsing), and the subcommands, to ask which one was given.
struct CommandLine {
  CLI::App app{"fairsem: a fair, lease-based distributed counting semaphore on Redis.", "fairsem"};

  RunArgs run;
  std::string run_url;
  std::string lease_text = "10s";
  std::string wait_text;
  std::string idle_expiry_text = "0";
  std::string on_lost = "kill";
  CLI::App* run_cmd = nullptr;

  StatusArgs status;
  std::string status_url;
  std::string watch_text;
  CLI::Option* watch_opt = nullptr;
  CLI::App* status_cmd = nullptr;

  ListArgs list;
  CLI::App* list_cmd = nullptr;

  FunctionsArgs functions;
  CLI::App* functions_cmd = nullptr;

  ExporterArgs exporter;
  std::string scrape_timeout = "5s";
  CLI::App* exporter_cmd = nullptr;

  EvictArgs evict;
  std::string evict_url;
  CLI::App* evict_cmd = nullptr;

  ResizeArgs resize;
  std::string resize_url;
  CLI::App* resize_cmd = nullptr;

  TenantArgs tenant;
  std::string tenant_url;
  std::string tenant_name;
  CLI::Option* tenant_opt = nullptr;
  CLI::Option* weight_opt = nullptr;
  CLI::App* tenant_cmd = nullptr;

  DemoArgs demo;
  std::string demo_lease = "2s";
};

/// Adds every subcommand (and the version flag and the help's footer) to `cl.app`.
void add_commands(CommandLine& cl);

}  // namespace fairsem::cli
