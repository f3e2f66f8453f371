// fairsem: the command-line face of the library. Caps how many copies of a command run at once
// across machines (`run`), shows and edits a semaphore (`status`, `evict`, `resize`), and
// demonstrates the guarantees on a private Redis (`demo`).

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <fairsem/fairsem.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace {

using fairsem::cli::kExitUsage;

constexpr const char* kExitCodes = R"(Exit codes:
  0      success (run: the command's own status, 128+N if it died by signal N;
         status --watch: ended by SIGINT or SIGTERM)
  1      evict: no such permit; demo: a guarantee check failed
  64     usage error: bad arguments, or --limit differs from the limit Redis stores
  69     Redis unreachable, or authentication refused
  70     internal error
  75     run: not acquired within --wait, evicted while waiting, or the permit lost
         (--on-lost kill)
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

}  // namespace

int main(int argc, char** argv) {
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

  CLI::App app{"fairsem: a fair, lease-based distributed counting semaphore on Redis.", "fairsem"};
  app.set_version_flag("--version", fmt::format("fairsem {}", fairsem::version()));
  app.require_subcommand(1);
  app.footer(kExitCodes);

  fairsem::cli::RunArgs run;
  std::string run_url;
  std::string lease_text = "10s";
  std::string wait_text;
  std::string on_lost = "kill";
  CLI::App* run_cmd = app.add_subcommand(
      "run",
      "Run CMD while holding a permit: waits in FIFO order, keeps the lease renewed, forwards "
      "SIGINT/SIGTERM/SIGHUP, releases when CMD ends and exits with its status. CMD gets "
      "FAIRSEM_PERMIT_ID, FAIRSEM_FENCING_TOKEN, FAIRSEM_PERMITS (the units it holds), "
      "FAIRSEM_SLOTS (its slots, 0..limit-1 and unique among the holders, comma-separated) and "
      "FAIRSEM_SLOT (the lowest of them) in its environment.");
  add_target(*run_cmd, run.target, run_url);
  run_cmd
      ->add_option("--limit", run.limit,
                   fmt::format("Permits across every client (1..{})", fairsem::kMaxLimit))
      ->required()
      ->transform(fairsem::examples::whole_number(1, fairsem::kMaxLimit));
  run_cmd
      ->add_option("--permits", run.permits,
                   "Units of the limit to hold at once (1..limit), granted together in FIFO "
                   "order")
      ->capture_default_str()
      ->transform(fairsem::examples::whole_number(1, fairsem::kMaxLimit));
  run_cmd->add_option("--lease", lease_text, "Lease, renewed while CMD runs")
      ->capture_default_str();
  run_cmd->add_option("--wait", wait_text,
                      "Give up (exit 75) if not granted within DUR; 0 tries once without "
                      "queueing (default: wait as long as it takes)");
  run_cmd
      ->add_option("--on-lost", on_lost,
                   "When the permit is lost: kill (SIGTERM CMD, exit 75) or warn")
      ->check(CLI::IsMember({"kill", "warn"}))
      ->capture_default_str();
  run_cmd->footer("Usage: fairsem run --name NAME --limit N [options] -- CMD [ARG...]");

  fairsem::cli::StatusArgs status;
  std::string status_url;
  CLI::App* status_cmd =
      app.add_subcommand("status", "Show holders and waiters (in queue order) of a semaphore");
  add_target(*status_cmd, status.target, status_url);
  status_cmd->add_flag("--json", status.json,
                       "One JSON object instead of a table (with --watch: one per line)");
  std::string watch_text;
  CLI::Option* watch_opt =
      status_cmd
          ->add_option("--watch", watch_text,
                       "Redraw every SECONDS (default 1; e.g. 0.5 or 250ms) until SIGINT or "
                       "SIGTERM (exit 0): in place on a terminal, else each frame after a "
                       "'--- TIME ---' line (with --json: one object per line). Once the first "
                       "read worked, Redis errors are shown and watching goes on")
          ->expected(0, 1)
          ->type_name("[SECONDS]");

  fairsem::cli::EvictArgs evict;
  std::string evict_url;
  CLI::App* evict_cmd = app.add_subcommand(
      "evict", "Remove one permit, holder or waiter; its owner is told (run applies --on-lost)");
  add_target(*evict_cmd, evict.target, evict_url);
  evict_cmd->add_option("--id", evict.id, "Permit id (see status)")->required();

  fairsem::cli::ResizeArgs resize;
  std::string resize_url;
  CLI::App* resize_cmd = app.add_subcommand(
      "resize",
      "Change the limit of a semaphore for every client. Growing grants waiters at once; "
      "shrinking takes no permit away: nothing is granted until fewer than NEW_LIMIT hold");
  resize_cmd->add_option("NAME,--name", resize.target.name, "Semaphore name")->required();
  resize_cmd
      ->add_option("NEW_LIMIT", resize.new_limit,
                   fmt::format("The new limit (1..{})", fairsem::kMaxLimit))
      ->required();
  resize_cmd->add_option("--url", resize_url, "Redis URL (see below)");
  resize_cmd->add_option("--prefix", resize.target.key_prefix, "Key prefix in Redis")
      ->capture_default_str();
  resize_cmd->footer("Usage: fairsem resize [--name] NAME NEW_LIMIT [--url URL] [--prefix P]");

  fairsem::cli::DemoArgs demo;
  std::string demo_lease = "2s";
  CLI::App* demo_cmd = app.add_subcommand(
      "demo",
      "Show fairsem at work: worker processes contend for a small limit on a private "
      "redis-server (or --url), one holder is SIGKILLed midway, and a summary checks the "
      "guarantees");
  demo_cmd->add_option("--url", demo.url, "Use this Redis instead of a private one");
  demo_cmd->add_option("--workers", demo.workers, "Worker processes")
      ->transform(fairsem::examples::whole_number(2, 64))
      ->capture_default_str();
  demo_cmd->add_option("--limit", demo.limit, "Permits")
      ->transform(fairsem::examples::whole_number(1, 16))
      ->capture_default_str();
  demo_cmd->add_option("--seconds", demo.seconds, "How long the workers contend")
      ->transform(fairsem::examples::whole_number(4, 3600))
      ->capture_default_str();
  demo_cmd->add_option("--lease", demo_lease, "Lease (the killed holder's permit returns after it)")
      ->capture_default_str();

  const std::string first = parsed_argc > 1 ? argv[1] : "";
  const std::vector<std::string> known = {"run", "status", "evict", "resize", "demo"};
  if (!first.empty() && first[0] != '-' &&
      std::find(known.begin(), known.end(), first) == known.end()) {
    return fairsem::cli::usage_error(
        "fairsem",
        fairsem::examples::hide_credentials(
            fmt::format("unknown command '{}' (use run, status, evict, resize or demo)", argv[1]),
            argc, argv));
  }
  try {
    std::vector<std::string> args(argv + 1, argv + parsed_argc);
    std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::string where = "fairsem";
    for (const CLI::App* sub : app.get_subcommands()) where += " " + sub->get_name();
    const std::string message = fairsem::examples::hide_credentials(e.what(), argc, argv);
    if (run_cmd->parsed() && !has_separator && dynamic_cast<const CLI::ExtrasError*>(&e)) {
      return fairsem::cli::usage_error(
          where, fmt::format("{} (is '--' missing before the command?)", message));
    }
    return fairsem::cli::usage_error(where, message);
  }

  if (run_cmd->parsed()) {
    if (!has_separator) {
      return fairsem::cli::usage_error(
          "fairsem run", "missing '--' before the command (fairsem run ... -- CMD [ARG...])");
    }
    if (command.empty()) return fairsem::cli::usage_error("fairsem run", "no command after '--'");
    try {
      run.target.url = fairsem::examples::resolve_url(run_url);
      run.lease = fairsem::cli::parse_duration(lease_text, "--lease");
      if (run.lease.count() == 0) throw fairsem::InvalidArgument("--lease must be positive");
      if (!wait_text.empty()) run.wait = fairsem::cli::parse_duration(wait_text, "--wait");
      run.kill_on_lost = on_lost == "kill";
      run.command = std::move(command);
    } catch (...) {
      return fairsem::cli::report_exception("fairsem run");
    }
    return fairsem::cli::run_main(run);
  }
  if (has_separator) {
    return fairsem::cli::usage_error("fairsem", "'--' is only for `fairsem run`");
  }
  if (status_cmd->parsed()) {
    if (watch_opt->count() > 0) {
      try {
        if (watch_text.empty()) {
          status.watch = std::chrono::seconds(1);
        } else {
          status.watch = fairsem::cli::parse_duration(watch_text, "--watch");
          if (status.watch->count() == 0) {
            throw fairsem::InvalidArgument(
                fmt::format("--watch \"{}\": the interval must be positive", watch_text));
          }
        }
      } catch (...) {
        return fairsem::cli::report_exception("fairsem status");
      }
    }
    status.target.url = fairsem::examples::resolve_url(status_url);
    return fairsem::cli::status_main(status);
  }
  if (evict_cmd->parsed()) {
    evict.target.url = fairsem::examples::resolve_url(evict_url);
    return fairsem::cli::evict_main(evict);
  }
  if (resize_cmd->parsed()) {
    // A positional NAME invites `fairsem resize URL N`: refuse it rather than resize a
    // semaphore named after the URL and print its password.
    if (resize.target.name.find("://") != std::string::npos) {
      return fairsem::cli::usage_error(
          "fairsem resize",
          fmt::format("NAME \"{}\" looks like a Redis URL; give the URL with --url",
                      fairsem::redact_url(resize.target.name)));
    }
    resize.target.url = fairsem::examples::resolve_url(resize_url);
    return fairsem::cli::resize_main(resize);
  }
  try {
    demo.lease = fairsem::cli::parse_duration(demo_lease, "--lease");
  } catch (...) {
    return fairsem::cli::report_exception("fairsem demo");
  }
  return fairsem::cli::demo_main(demo);
}
