// The `fairsem` subcommands' options and help (command_line.hpp).

#include "command_line.hpp"

#include <fmt/format.h>
#include <fairsem/fairsem.hpp>

#include <limits>
#include <string>

#include "args.hpp"

namespace fairsem::cli {

namespace {

using args::whole_number;

/// The largest weight the tenant script takes: 2^53, the last whole number a Lua double holds.
constexpr long long kMaxWeight = 9'007'199'254'740'992;

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

void add_target(CLI::App& sub, Target& target, std::string& url) {
  sub.add_option("--name", target.name, "Semaphore name")->required();
  sub.add_option("--url", url, "Redis URL (see below)");
  sub.add_option("--prefix", target.key_prefix, "Key prefix in Redis")->capture_default_str();
}

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
  cmd->add_option("--tenant", cl.run.tenant,
                  "Whose request this is: among tenants with waiters, permits go by weighted "
                  "fair queuing (weights: fairsem tenant), within each in FIFO order (default: "
                  "\"\", the default tenant)")
      ->check(args::tenant_name());
  cmd->add_option("--idle-expiry", cl.idle_expiry_text,
                  "The semaphore's keys expire once nobody has held or waited on it for DUR "
                  "(stored by its first user; 0: never)")
      ->capture_default_str();
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

/// What the commands that walk every semaphore under a prefix (list, exporter) take.
void add_listing_options(CLI::App& sub, std::string& url, std::string& prefix, std::string& match) {
  sub.add_option("--url", url, "Redis URL (see below)");
  sub.add_option("--prefix", prefix, "Key prefix in Redis")->capture_default_str();
  sub.add_option("--match", match, "Only names matching this glob (* ? [...])")
      ->capture_default_str();
}

void add_list(CommandLine& cl) {
  CLI::App* cmd = cl.app.add_subcommand(
      "list",
      "List every semaphore under a key prefix, on every master: limit, units held, holders, "
      "waiters, idle time (where the server can tell: Redis 7.2+, Valkey) and node");
  add_listing_options(*cmd, cl.list.url, cl.list.key_prefix, cl.list.match);
  cmd->add_flag("--json", cl.list.json,
                "One JSON array of objects (name, limit, held, holders, waiting, idle_seconds, "
                "counter, node) instead of a table");
  cl.list_cmd = cmd;
}

void add_functions(CommandLine& cl) {
  CLI::App* cmd = cl.app.add_subcommand(
      "functions",
      "list: the fairsem function libraries loaded on every master, with the version each "
      "belongs to. prune: delete every one but this version's (clients of other versions "
      "load theirs again when they need it)");
  cmd->add_option("ACTION", cl.functions.action, "list or prune")
      ->required()
      ->check(CLI::IsMember({"list", "prune"}));
  cmd->add_option("--url", cl.functions.url, "Redis URL (see below)");
  cmd->add_flag("--dry-run", cl.functions.dry_run, "prune: delete nothing, show what it would");
  cmd->add_flag("--json", cl.functions.json,
                "One JSON array of objects (node, library, version, functions, current)");
  cl.functions_cmd = cmd;
}

void add_exporter(CommandLine& cl) {
  CLI::App* cmd = cl.app.add_subcommand(
      "exporter",
      "Serve the server's view of every semaphore under a prefix (every master) to Prometheus: "
      "one listing per scrape of /metrics, bounded by --scrape-timeout. Runs until SIGINT or "
      "SIGTERM (exit 0)");
  cmd->add_option("--listen", cl.exporter.listen, "HOST:PORT to serve /metrics on (port 0: any)")
      ->capture_default_str();
  add_listing_options(*cmd, cl.exporter.url, cl.exporter.key_prefix, cl.exporter.match);
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

void add_tenant(CommandLine& cl) {
  CLI::App* cmd = cl.app.add_subcommand(
      "tenant",
      "Show each tenant of a semaphore (weight, units held and waiting, waiters, oldest wait), "
      "or set TENANT's weight for every client: among tenants with waiters, each gets units in "
      "proportion to its weight (1 by default)");
  cmd->add_option("NAME,--name", cl.tenant.target.name, "Semaphore name")->required();
  cl.tenant_opt = cmd->add_option("TENANT", cl.tenant_name,
                                  "The tenant whose weight to set (\"\": the default tenant)")
                      ->check(args::tenant_name());
  cl.weight_opt =
      cmd->add_option("WEIGHT", cl.tenant.weight, fmt::format("Its new weight (1..{})", kMaxWeight))
          ->transform(whole_number(1, kMaxWeight));
  cmd->add_option("--url", cl.tenant_url, "Redis URL (see below)");
  cmd->add_option("--prefix", cl.tenant.target.key_prefix, "Key prefix in Redis")
      ->capture_default_str();
  cmd->add_flag("--json", cl.tenant.json, "One JSON object instead of text");
  cmd->footer("Usage: fairsem tenant [--name] NAME [TENANT WEIGHT] [--url URL] [--prefix P]");
  cl.tenant_cmd = cmd;
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

}  // namespace

void add_commands(CommandLine& cl) {
  cl.app.set_version_flag("--version", fmt::format("fairsem {}", fairsem::version()));
  cl.app.require_subcommand(1);
  cl.app.footer(kExitCodes);
  add_run(cl);
  add_status(cl);
  add_list(cl);
  add_functions(cl);
  add_exporter(cl);
  add_evict(cl);
  add_resize(cl);
  add_tenant(cl);
  add_demo(cl);
}

}  // namespace fairsem::cli
