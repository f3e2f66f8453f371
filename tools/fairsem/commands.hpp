#pragma once

// The `fairsem` subcommands, each given its parsed and checked arguments.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace fairsem::cli {

struct Target {
  std::string url;  // as resolved by args::resolve_url()
  std::string name;
  std::string key_prefix = "fairsem";
};

struct RunArgs {
  Target target;
  long long limit = 0;
  long long permits = 1;  // units of the limit the command holds
  std::chrono::milliseconds lease{10'000};
  std::optional<std::chrono::milliseconds> wait;  // none: wait as long as it takes
  long long max_waiters = 0;                      // SemaphoreOptions::max_waiters
  std::string tenant;                             // SemaphoreOptions::tenant ("": the default)
  std::chrono::milliseconds idle_expiry{0};       // SemaphoreOptions::idle_expiry
  bool kill_on_lost = true;
  std::vector<std::string> command;
};

struct StatusArgs {
  Target target;
  bool json = false;
  std::optional<std::chrono::milliseconds> watch;  // --watch: redraw at this interval (> 0)
};

struct EvictArgs {
  Target target;
  std::string id;
};

struct ResizeArgs {
  Target target;
  std::string new_limit;  // as typed; checked by resize_main before anything is sent
};

struct TenantArgs {
  Target target;
  std::optional<std::string> tenant;  // with weight: set it; neither: show every tenant
  long long weight = 0;
  bool json = false;
};

struct ListArgs {
  std::string url;  // as resolved by args::resolve_url()
  std::string key_prefix = "fairsem";
  std::string match = "*";  // a Redis glob on the names
  bool json = false;
};

struct FunctionsArgs {
  std::string action;    // "list" or "prune"
  std::string url;       // as resolved by args::resolve_url()
  bool dry_run = false;  // prune: delete nothing, print what would be deleted
  bool json = false;
};

struct ExporterArgs {
  std::string url;  // as resolved by args::resolve_url()
  std::string listen = "127.0.0.1:9464";
  std::string key_prefix = "fairsem";
  std::string match = "*";
  std::chrono::milliseconds scrape_timeout{5'000};  // one listing's time limit
};

struct DemoArgs {
  std::string url;  // empty: start a private redis-server
  int workers = 6;
  long long limit = 2;
  int seconds = 20;
  std::chrono::milliseconds lease{2'000};
};

int run_main(const RunArgs& args);
int status_main(const StatusArgs& args);  // calls watch_main for --watch
int watch_main(const StatusArgs& args);
int evict_main(const EvictArgs& args);
int resize_main(const ResizeArgs& args);
int tenant_main(const TenantArgs& args);
int list_main(const ListArgs& args);
int functions_main(const FunctionsArgs& args);
int exporter_main(const ExporterArgs& args);  // needs prometheus-cpp (FAIRSEM_WITH_PROMETHEUS)
int demo_main(const DemoArgs& args);

}  // namespace fairsem::cli
