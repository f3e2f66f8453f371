// fairsem: the command-line face of the library. Caps how many copies of a command run at once
// across machines (`run`), shows and edits a semaphore (`status`, `evict`, `resize`), lists
// every semaphore of a deployment (`list`), and
// demonstrates the guarantees on a private Redis (`demo`).

#include <fmt/format.h>
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
#include "commands.hpp"
#include "common.hpp"

namespace {

using fairsem::cli::report_exception;
using fairsem::cli::usage_error;
using fairsem::examples::hide_credentials;
using fairsem::examples::resolve_url;
using fairsem::examples::whole_number;

constexpr const char* kExitCodes = R"(Exit codes:
  0      success (run: the command's own status, 128+N if it died by signal N;
         status --watch: ended by SIGINT or SIGTERM)
  1      evict: no such permit; demo: a guarantee check failed
  64     usage error: bad arguments, or --limit differs from the limit Redis stores
  69     Redis unreachable, or authentication refused
  70     internal error
  75     run: not acquired within --wait, the queue full (--max-waiters), evicted while
         waiting, or the permit lost (--on-lost kill)
  128+N  run: interrupted by signal N before the command started
  126    run: the command could not be executed
  127    run: the command was not found

The Redis URL comes from --url, else $FAIRSEM_URL, else $REDIS_URL, else
redis://127.0.0.1:6379 (redis://[user:password@]host:port[/db], unix:///path?db=N;
Redis Cluster: redis://h1:p1,h2:p2,... or redis-cluster://host:port; Sentinel:
redis-sentinel://s1:26379,s2:26379/master_name[/db]).
Durations: 250ms, 10s, 2m, 1h, or bare seconds.
)";

void add_target(CLI::App& sub, fairsem::cli::Target& target, std::string& url) {
  sub.add_option("--name", target.name, "Semaphore name")->required();
  sub.add_option("--url", url, "Redis URL (see below)");
  sub.add_option("--prefix", target.key_prefix, "Key prefix in Redis")->capture_default_str();
}

/// The command line as CLI11 takes it apart: every subcommand's arguments (as typed where they
/// are checked after parsing), and the subcommands, to ask which one was given.
struct CommandLine {
  CLI::App app{"fairsem: a fair, lease-based distributed counting semaphore on Redis.", "fairsem"};

  fairsem::cli::RunArgs run;
  std::string run_url;
  std::string lease_text = "10s";
  std::string wait_text;
  std::string on_lost = "kill";
  CLI::App* run_cmd = nullptr;

  fairsem::cli::StatusArgs status;
  std::string status_url;
  std::string watch_text;
  CLI::Option* watch_opt = nullptr;
  CLI::App* status_cmd = nullptr;

  fairsem::cli::ListArgs list;
  CLI::App* list_cmd = nullptr;

  fairsem::cli::ExporterArgs exporter;
  std::string scrape_timeout = "5s";
  CLI::App* exporter_cmd = nullptr;

  fairsem::cli::EvictArgs evict;
  std::string evict_url;
  CLI::App* evict_cmd = nullptr;

  fairsem::cli::ResizeArgs resize;
  std::string resize_url;
  CLI::App* resize_cmd = nullptr;

  fairsem::cli::DemoArgs demo;
  std::string demo_lease = "2s";
};

void add_run(CommandLine& cl) {
  CLI::App* cmd = cl.app.add_subcommand(
      "run",
      "Run CMD while holding a permit: waits in FIFO order, keeps the lease renewed, forwards "
      "SIGINT/SIGTERM/SIGHUP, releases when CMD ends and exits with its status. CMD gets "
      "FAIRSEM_PERMIT_ID, FAIRSEM_FENCING_TOKEN, FAIRSEM_PERMITS (the units it holds), "
      "FAIRSEM_SLOTS (its slots, 0..limit-1 and unique among the holders, comma-separated) and "
      "FAIRSEM_SLOT (the lowest of them) in its environment.");
  add_target(*cmd, cl.run.target, cl.run_url);
  cmd->add_option("--limit", cl.run.limit,
                  fmt::format("Permits across every client (1..{})", fairsem::kMaxLimit))
      ->required()
      ->transform(whole_number(1, fairsem::kMaxLimit));
  cmd->add_option("--permits", cl.run.permits,
                  "Units of the limit to hold at once (1..limit), granted together in FIFO "
                  "order")
      ->capture_default_str()
      ->transform(whole_number(1, fairsem::kMaxLimit));
  cmd->add_option("--lease", cl.lease_text, "Lease, renewed while CMD runs")->capture_default_str();
  cmd->add_option("--wait", cl.wait_text,
                  "Give up (exit 75) if not granted within DUR; 0 tries once without "
                  "queueing (default: wait as long as it takes)");
  cmd->add_option("--max-waiters", cl.run.max_waiters,
                  "Do not queue behind N or more waiting requests: exit 75 at once instead "
                  "(default: 0, no bound)")
      ->transform(whole_number(0, std::numeric_limits<long long>::max()));
  cmd->add_option("--on-lost", cl.on_lost,
                  "When the permit is lost: kill (SIGTERM CMD, exit 75) or warn")
      ->check(CLI::IsMember({"kill", "warn"}))
      ->capture_default_str();
  cmd->footer("Usage: fairsem run --name NAME --limit N [options] -- CMD [ARG...]");
  cl.run_cmd = cmd;
}

void add_status(CommandLine& cl) {
  CLI::App* cmd =
      cl.app.add_subcommand("status", "Show holders and waiters (in queue order) of a semaphore");
  add_target(*cmd, cl.status.target, cl.status_url);
  cmd->add_flag("--json", cl.status.json,
                "One JSON object instead of a table (with --watch: one per line)");
  cl.watch_opt =
      cmd->add_option("--watch", cl.watch_text,
                      "Redraw every SECONDS (default 1; e.g. 0.5 or 250ms) until SIGINT or "
                      "SIGTERM (exit 0): in place on a terminal, else each frame after a "
                      "'--- TIME ---' line (with --json: one object per line). Once the first "
                      "read worked, Redis errors are shown and watching goes on")
          ->expected(0, 1)
          ->type_name("[SECONDS]");
  cl.status_cmd = cmd;
}

void add_list(CommandLine& cl) {
  CLI::App* cmd = cl.app.add_subcommand(
      "list",
      "List every semaphore under a key prefix, on every master: limit, units held, holders, "
      "waiters, idle time (where the server can tell: Redis 7.2+, Valkey) and node");
  cmd->add_option("--url", cl.list.url, "Redis URL (see below)");
  cmd->add_option("--prefix", cl.list.key_prefix, "Key prefix in Redis")->capture_default_str();
  cmd->add_option("--match", cl.list.match, "Only names matching this glob (* ? [...])")
      ->capture_default_str();
  cmd->add_flag("--json", cl.list.json,
                "One JSON array of objects (name, limit, held, holders, waiting, idle_seconds, "
                "counter, node) instead of a table");
  cl.list_cmd = cmd;
}

void add_exporter(CommandLine& cl) {
  CLI::App* cmd = cl.app.add_subcommand(
      "exporter",
      "Serve the server's view of every semaphore under a prefix (every master) to Prometheus: "
      "one listing per scrape of /metrics, bounded by --scrape-timeout. Runs until SIGINT or "
      "SIGTERM (exit 0)");
  cmd->add_option("--listen", cl.exporter.listen, "HOST:PORT to serve /metrics on (port 0: any)")
      ->capture_default_str();
  cmd->add_option("--url", cl.exporter.url, "Redis URL (see below)");
  cmd->add_option("--prefix", cl.exporter.key_prefix, "Key prefix in Redis")->capture_default_str();
  cmd->add_option("--match", cl.exporter.match, "Only names matching this glob (* ? [...])")
      ->capture_default_str();
  cmd->add_option("--scrape-timeout", cl.scrape_timeout,
                  "Give up a scrape's listing after DUR (fairsem_exporter_up 0)")
      ->capture_default_str();
  cl.exporter_cmd = cmd;
}

void add_evict(CommandLine& cl) {
  CLI::App* cmd = cl.app.add_subcommand(
      "evict", "Remove one permit, holder or waiter; its owner is told (run applies --on-lost)");
  add_target(*cmd, cl.evict.target, cl.evict_url);
  cmd->add_option("--id", cl.evict.id, "Permit id (see status)")->required();
  cl.evict_cmd = cmd;
}

void add_resize(CommandLine& cl) {
  CLI::App* cmd = cl.app.add_subcommand(
      "resize",
      "Change the limit of a semaphore for every client. Growing grants waiters at once; "
      "shrinking takes no permit away: nothing is granted until fewer than NEW_LIMIT hold");
  cmd->add_option("NAME,--name", cl.resize.target.name, "Semaphore name")->required();
  cmd->add_option("NEW_LIMIT", cl.resize.new_limit,
                  fmt::format("The new limit (1..{})", fairsem::kMaxLimit))
      ->required();
  cmd->add_option("--url", cl.resize_url, "Redis URL (see below)");
  cmd->add_option("--prefix", cl.resize.target.key_prefix, "Key prefix in Redis")
      ->capture_default_str();
  cmd->footer("Usage: fairsem resize [--name] NAME NEW_LIMIT [--url URL] [--prefix P]");
  cl.resize_cmd = cmd;
}

void add_demo(CommandLine& cl) {
  CLI::App* cmd = cl.app.add_subcommand(
      "demo",
      "Show fairsem at work: worker processes contend for a small limit on a private "
      "redis-server (or --url), one holder is SIGKILLed midway, and a summary checks the "
      "guarantees");
  cmd->add_option("--url", cl.demo.url, "Use this Redis instead of a private one");
  cmd->add_option("--workers", cl.demo.workers, "Worker processes")
      ->transform(whole_number(2, 64))
      ->capture_default_str();
  cmd->add_option("--limit", cl.demo.limit, "Permits")
      ->transform(whole_number(1, 16))
      ->capture_default_str();
  cmd->add_option("--seconds", cl.demo.seconds, "How long the workers contend")
      ->transform(whole_number(4, 3600))
      ->capture_default_str();
  cmd->add_option("--lease", cl.demo_lease, "Lease (the killed holder's permit returns after it)")
      ->capture_default_str();
}

/// Parses argv[1..parsed_argc) (what comes before "--") into `cl`. Returns nullopt to go on, or
/// the exit code: 0 after --help or --version, 64 after a bad argument.
std::optional<int> parse(CommandLine& cl, int argc, char** argv, int parsed_argc,
                         bool has_separator) {
  const std::string first = parsed_argc > 1 ? argv[1] : "";
  const std::vector<std::string> known = {"run",    "status", "list",    "evict",
                                          "resize", "demo",   "exporter"};
  if (!first.empty() && first[0] != '-' &&
      std::find(known.begin(), known.end(), first) == known.end()) {
    return usage_error(
        "fairsem",
        hide_credentials(
            fmt::format(
                "unknown command '{}' (use run, status, list, exporter, evict, resize or demo)",
                argv[1]),
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
  cl.app.set_version_flag("--version", fmt::format("fairsem {}", fairsem::version()));
  cl.app.require_subcommand(1);
  cl.app.footer(kExitCodes);
  add_run(cl);
  add_status(cl);
  add_list(cl);
  add_exporter(cl);
  add_evict(cl);
  add_resize(cl);
  add_demo(cl);
  if (const auto exit_code = parse(cl, argc, argv, parsed_argc, has_separator)) return *exit_code;

  if (cl.run_cmd->parsed()) return start_run(cl, std::move(command), has_separator);
  if (has_separator) return usage_error("fairsem", "'--' is only for `fairsem run`");
  if (cl.status_cmd->parsed()) return start_status(cl);
  if (cl.list_cmd->parsed()) {
    cl.list.url = resolve_url(cl.list.url);
    return fairsem::cli::list_main(cl.list);
  }
  if (cl.exporter_cmd->parsed()) return start_exporter(cl);
  if (cl.evict_cmd->parsed()) {
    cl.evict.target.url = resolve_url(cl.evict_url);
    return fairsem::cli::evict_main(cl.evict);
  }
  if (cl.resize_cmd->parsed()) return start_resize(cl);
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
