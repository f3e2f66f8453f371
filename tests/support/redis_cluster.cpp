#include "redis_cluster.hpp"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "fairsem/errors.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/net/router.hpp"
#include "node_admin.hpp"
#include "run_captured.hpp"
#include "server_build.hpp"
#include "wait.hpp"

namespace fairsem::test {

namespace {

using detail::Reply;

/// The value of `key` in an INFO-style "key:value\r\n" text, or "" when it is missing.
std::string info_field(const std::string& text, std::string_view key) {
  const std::string needle = std::string(key) + ":";
  for (std::size_t at = 0; (at = text.find(needle, at)) != std::string::npos; ++at) {
    if (at != 0 && text[at - 1] != '\n') continue;
    const std::size_t begin = at + needle.size();
    const std::size_t end = text.find_first_of("\r\n", begin);
    return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  }
  return "";
}

/// Drops terminal colour codes (redis-cli prints them even into a pipe).
std::string strip_ansi(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
      i += 2;
      while (i < text.size() && !(text[i] >= '@' && text[i] <= '~')) ++i;
      continue;
    }
    out += text[i];
  }
  return out;
}

struct SlotRange {
  int first = 0;
  int last = 0;
  int master = 0;
  std::vector<int> replicas;  // sorted
};

/// CLUSTER SLOTS of `node`, sorted by first slot.
std::vector<SlotRange> cluster_slots(const RedisServer& node) {
  const Reply reply = admin(node, {"CLUSTER", "SLOTS"});
  std::vector<SlotRange> ranges;
  for (const Reply& item : detail::expect_array(reply, "CLUSTER SLOTS")) {
    const auto& fields = detail::expect_array(item, "a CLUSTER SLOTS range", 3);
    SlotRange range;
    range.first = static_cast<int>(detail::expect_integer(fields[0], "first slot"));
    range.last = static_cast<int>(detail::expect_integer(fields[1], "last slot"));
    range.master = static_cast<int>(
        detail::expect_integer(detail::expect_array(fields[2], "master", 2)[1], "master port"));
    for (std::size_t i = 3; i < fields.size(); ++i) {
      range.replicas.push_back(static_cast<int>(
          detail::expect_integer(detail::expect_array(fields[i], "replica", 2)[1], "port")));
    }
    std::sort(range.replicas.begin(), range.replicas.end());
    ranges.push_back(std::move(range));
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const SlotRange& a, const SlotRange& b) { return a.first < b.first; });
  return ranges;
}

/// "0-5460:P1/R1 5461-10922:P2/R2 ...", adjacent ranges of one master merged; "" when not
/// every slot is covered (then `gap` says where).
std::string describe_slots(const std::vector<SlotRange>& ranges, std::string* gap) {
  std::vector<SlotRange> merged;
  for (const SlotRange& r : ranges) {
    if (!merged.empty() && merged.back().last + 1 == r.first && merged.back().master == r.master &&
        merged.back().replicas == r.replicas) {
      merged.back().last = r.last;
    } else {
      merged.push_back(r);
    }
  }
  std::string text;
  int next = 0;
  for (const SlotRange& r : merged) {
    if (r.first != next) {
      *gap = fmt::format("slot {} is not served", next);
      return "";
    }
    text += fmt::format("{}-{}:{}", r.first, r.last, r.master);
    for (std::size_t i = 0; i < r.replicas.size(); ++i) {
      text += fmt::format("{}{}", i == 0 ? "/" : ",", r.replicas[i]);
    }
    text += " ";
    next = r.last + 1;
  }
  if (next != RedisCluster::kSlots) {
    *gap = "slot " + std::to_string(next) + " is not served";
    return "";
  }
  return text;
}

/// redis-cli's flags for reaching a server as `tls` says (none without TLS).
std::vector<std::string> redis_cli_tls_args(const TlsOptions& tls) {
  if (!tls.enabled) return {};
  std::vector<std::string> args = {"--tls"};
  const std::pair<const char*, const std::string*> files[] = {{"--cacert", &tls.cacert},
                                                              {"--cacertdir", &tls.cacertdir},
                                                              {"--cert", &tls.cert},
                                                              {"--key", &tls.key},
                                                              {"--sni", &tls.sni}};
  for (const auto& [flag, value] : files) {
    if (!value->empty()) args.insert(args.end(), {flag, *value});
  }
  if (tls.insecure) args.emplace_back("--insecure");
  return args;
}

/// A free loopback port whose cluster bus port (port + 10000) is free too.
int port_with_free_bus() {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int port = free_loopback_port();
    if (port + 10000 <= 65535 && loopback_port_free(port + 10000)) return port;
  }
  throw std::runtime_error("no free loopback port with a free port + 10000 for the cluster bus");
}

}  // namespace

RedisCluster::RedisCluster(int masters, int replicas_per_master,
                           std::vector<std::string> extra_args) {
  if (masters < 3) {
    throw std::invalid_argument("RedisCluster: redis-cli --cluster create needs 3 masters or more");
  }
  if (replicas_per_master < 0) {
    throw std::invalid_argument("RedisCluster: replicas_per_master must not be negative");
  }
  const std::string cli = find_in_path(
      "redis-cli",
      "The cluster tests create the cluster with it: install the Debian package redis-tools "
      "(apt-get install redis-tools; it comes with redis-server).");
  const int total = masters * (1 + replicas_per_master);
  const bool bus_port_option = accepts_cluster_port(server_build(find_redis_server()));
  for (int i = 0; i < total; ++i) {
    // Test-friendly timers: a full sync starts at once instead of waiting 5 s for more
    // replicas, and a master pings its replicas every second instead of every 10 s. (A fresh
    // replica's offset stays 0 until the master sends something, and CLUSTER SLOTS leaves out
    // replicas with offset 0.)
    // The bus port defaults to port + 10000, which does not exist for ports above 55535: give
    // each node a free one (--cluster-port, Redis >= 7 and Valkey), or on Redis 6.2 pick a port
    // whose port + 10000 is free. If someone takes it first, the node cannot start; try another.
    for (int attempt = 0;; ++attempt) {
      std::vector<std::string> args = {"--cluster-enabled",
                                       "yes",
                                       "--cluster-config-file",
                                       "{dir}/nodes.conf",
                                       "--cluster-node-timeout",
                                       std::to_string(kNodeTimeoutMs),
                                       "--cluster-require-full-coverage",
                                       "no",
                                       "--cluster-allow-replica-migration",
                                       "no",
                                       "--repl-diskless-sync-delay",
                                       "0",
                                       "--repl-ping-replica-period",
                                       "1"};
      if (bus_port_option) {
        args.insert(args.end(), {"--cluster-port", std::to_string(free_loopback_port())});
      }
      args.insert(args.end(), extra_args.begin(), extra_args.end());
      try {
        nodes_.push_back(bus_port_option
                             ? std::make_unique<RedisServer>(std::move(args))
                             : std::make_unique<RedisServer>(std::move(args), port_with_free_bus));
        break;
      } catch (const std::exception& e) {
        if (attempt == 2) throw std::runtime_error(std::string("RedisCluster: ") + e.what());
      }
    }
  }
  std::vector<int> ports = node_ports();
  create_cluster(ports, replicas_per_master);
  for (int port : ports) {
    try {
      ids_.push_back(detail::expect_string(admin(node(port), {"CLUSTER", "MYID"}), "CLUSTER MYID"));
    } catch (const std::exception& e) {
      fail("CLUSTER MYID on 127.0.0.1:" + std::to_string(port) + " failed: " + e.what());
    }
  }
  seeds_ = master_ports();
}

RedisCluster::~RedisCluster() {
  // SIGKILL: nothing to save, and no node waits for its replicas to catch up on shutdown.
  for (auto& n : nodes_) n->kill();
}

void RedisCluster::create_cluster(const std::vector<int>& ports, int replicas_per_master) {
  std::vector<std::string> argv = {
      find_in_path("redis-cli", "Install the Debian package redis-tools."), "--cluster", "create"};
  for (int port : ports) argv.push_back("127.0.0.1:" + std::to_string(port));
  argv.insert(argv.end(),
              {"--cluster-replicas", std::to_string(replicas_per_master), "--cluster-yes"});
  // The nodes were started alike: the first one's TLS settings are every node's.
  const std::vector<std::string> tls = redis_cli_tls_args(node(ports.front()).options().tls);
  argv.insert(argv.end(), tls.begin(), tls.end());
  const RunResult run = run_captured(argv, std::chrono::seconds(120));
  if (run.timed_out || !WIFEXITED(run.status) || WEXITSTATUS(run.status) != 0) {
    fail(std::string("redis-cli --cluster create ") +
         (run.timed_out ? "did not finish within 120 s" : "failed") + " (wait status " +
         std::to_string(run.status) + "); it printed:\n" + strip_ansi(run.output));
  }
  // redis-cli returns once the nodes have met; the replicas' roles and the slot map still
  // have to spread by gossip.
  const int total = static_cast<int>(ports.size());
  std::string why;
  const bool formed = wait_until(
      [&] {
        try {
          for (int port : ports) {
            const std::string info =
                detail::expect_string(admin(node(port), {"CLUSTER", "INFO"}), "CLUSTER INFO");
            if (info_field(info, "cluster_known_nodes") != std::to_string(total)) {
              why = "127.0.0.1:" + std::to_string(port) + " knows " +
                    info_field(info, "cluster_known_nodes") + " of " + std::to_string(total) +
                    " nodes";
              return false;
            }
          }
          for (const SlotRange& r : cluster_slots(node(ports.front()))) {
            if (static_cast<int>(r.replicas.size()) != replicas_per_master) {
              why = "master 127.0.0.1:" + std::to_string(r.master) + " has " +
                    std::to_string(r.replicas.size()) + " replicas";
              return false;
            }
          }
        } catch (const std::exception& e) {
          why = e.what();
          return false;
        }
        return true;
      },
      std::chrono::seconds(60));
  if (!formed) fail("the cluster did not form within 60 s: " + why);
  wait_stable();
}

std::string RedisCluster::seed_url() const {
  ConnectionOptions options = node(seeds_.front()).options();  // TLS settings, if any
  options.cluster = true;
  for (std::size_t i = 1; i < seeds_.size(); ++i) options.seeds.push_back({"127.0.0.1", seeds_[i]});
  return options.redacted_url();  // nothing to hide: the nodes have no password
}

std::vector<int> RedisCluster::node_ports() const {
  std::vector<int> ports;
  for (const auto& n : nodes_) ports.push_back(n->port());
  return ports;
}

namespace {

/// CLUSTER SLOTS from the first of `nodes` that answers.
std::vector<SlotRange> slots_from_any(const std::vector<std::unique_ptr<RedisServer>>& nodes) {
  std::string errors;
  for (const auto& n : nodes) {
    if (!n->running()) continue;
    try {
      return cluster_slots(*n);
    } catch (const std::exception& e) {
      errors += "\n  127.0.0.1:" + std::to_string(n->port()) + ": " + e.what();
    }
  }
  throw std::runtime_error("RedisCluster: no node answered CLUSTER SLOTS" + errors);
}

}  // namespace

int RedisCluster::master_port_for_slot(int slot) const {
  if (slot < 0 || slot >= kSlots) throw std::out_of_range("slot " + std::to_string(slot));
  for (const SlotRange& r : slots_from_any(nodes_)) {
    if (r.first <= slot && slot <= r.last) return r.master;
  }
  throw std::runtime_error("RedisCluster: no master serves slot " + std::to_string(slot));
}

std::vector<int> RedisCluster::master_ports() const {
  std::vector<int> masters;  // the ranges come sorted by first slot
  for (const SlotRange& r : slots_from_any(nodes_)) {
    if (std::find(masters.begin(), masters.end(), r.master) == masters.end()) {
      masters.push_back(r.master);
    }
  }
  return masters;
}

int RedisCluster::replica_port_of(int master_port) const {
  const std::string id = node_id(master_port);
  std::vector<int> ask = {master_port};
  for (int port : node_ports()) {
    if (port != master_port) ask.push_back(port);
  }
  std::string errors;
  for (int port : ask) {
    if (!node(port).running()) continue;
    std::vector<int> replicas;
    try {
      // Named: a temporary in the range expression would not live through the loop.
      const Reply lines = admin(node(port), {"CLUSTER", "REPLICAS", id});
      for (const Reply& line : detail::expect_array(lines, "CLUSTER REPLICAS")) {
        // "<id> <ip>:<port>@<cport>[,<hostname>] <flags> <master id> ..."
        std::istringstream fields(detail::expect_string(line, "a CLUSTER REPLICAS line"));
        std::string node_id_field, address, flags;
        fields >> node_id_field >> address >> flags;
        if (flags.find("fail") != std::string::npos ||
            flags.find("handshake") != std::string::npos ||
            flags.find("noaddr") != std::string::npos) {
          continue;
        }
        const std::size_t colon = address.rfind(':', address.find('@'));
        replicas.push_back(std::stoi(address.substr(colon + 1)));
      }
    } catch (const std::exception& e) {
      errors += "\n  127.0.0.1:" + std::to_string(port) + ": " + e.what();
      continue;
    }
    if (replicas.empty()) {
      throw std::runtime_error("RedisCluster: 127.0.0.1:" + std::to_string(master_port) +
                               " has no healthy replica (as 127.0.0.1:" + std::to_string(port) +
                               " sees it)");
    }
    return *std::min_element(replicas.begin(), replicas.end());
  }
  throw std::runtime_error("RedisCluster: no node answered CLUSTER REPLICAS" + errors);
}

std::string RedisCluster::node_id(int port) const {
  for (std::size_t i = 0; i < nodes_.size() && i < ids_.size(); ++i) {
    if (nodes_[i]->port() == port) return ids_[i];
  }
  throw std::out_of_range("RedisCluster: no node on port " + std::to_string(port));
}

RedisServer& RedisCluster::node(int port) {
  for (auto& n : nodes_) {
    if (n->port() == port) return *n;
  }
  throw std::out_of_range("RedisCluster: no node on port " + std::to_string(port));
}

const RedisServer& RedisCluster::node(int port) const {
  return const_cast<RedisCluster*>(this)->node(port);
}

int RedisCluster::key_slot(std::string_view key) { return detail::key_slot(key); }

int RedisCluster::semaphore_slot(const std::string& name) { return key_slot("{" + name + "}"); }

std::string RedisCluster::unstable_reason() const {
  std::string agreed;
  int agreed_by = 0;
  for (const auto& n : nodes_) {
    if (!n->running()) continue;
    const int port = n->port();
    const std::string who = "127.0.0.1:" + std::to_string(port);
    try {
      const std::string info =
          detail::expect_string(admin(*n, {"CLUSTER", "INFO"}), "CLUSTER INFO");
      const std::string state = info_field(info, "cluster_state");
      if (state != "ok") return who + " reports cluster_state:" + state;
      const Role role = role_of(*n);
      if (role.role == "slave" && role.link_state != "connected") {
        return "replica " + who + ": its link to its master is '" + role.link_state + "'";
      }
      std::string gap;
      const std::string slots = describe_slots(cluster_slots(*n), &gap);
      if (slots.empty()) return who + " says " + gap;
      if (agreed.empty()) {
        agreed = slots;
        agreed_by = port;
      } else if (slots != agreed) {
        return "127.0.0.1:" + std::to_string(agreed_by) + " and " + who +
               " disagree on the slots: '" + agreed + "' vs '" + slots + "'";
      }
    } catch (const std::exception& e) {
      return who + ": " + e.what();
    }
  }
  if (agreed.empty()) return "no node is running";
  return "";
}

void RedisCluster::wait_stable(int timeout_ms) const {
  std::string why;
  if (!wait_until([&] { return (why = unstable_reason()).empty(); },
                  std::chrono::milliseconds(timeout_ms))) {
    fail("the cluster did not become stable within " + std::to_string(timeout_ms) + " ms: " + why);
  }
}

void RedisCluster::begin_migration(int slot, int to_port) {
  if (migration_) throw std::logic_error("RedisCluster: a migration is already in progress");
  const int source = master_port_for_slot(slot);
  if (source == to_port) {
    throw std::invalid_argument("RedisCluster: 127.0.0.1:" + std::to_string(to_port) +
                                " already serves slot " + std::to_string(slot));
  }
  const std::string s = std::to_string(slot);
  try {
    admin(node(to_port), {"CLUSTER", "SETSLOT", s, "IMPORTING", node_id(source)});
    admin(node(source), {"CLUSTER", "SETSLOT", s, "MIGRATING", node_id(to_port)});
  } catch (const Error& e) {
    fail("starting the migration of slot " + s + " from 127.0.0.1:" + std::to_string(source) +
         " to 127.0.0.1:" + std::to_string(to_port) + " failed: " + e.what());
  }
  migration_ = Migration{slot, source, to_port};
}

std::size_t RedisCluster::migrate_keys(std::size_t max_keys) {
  if (!migration_) throw std::logic_error("RedisCluster: no migration in progress");
  if (max_keys == 0) return 0;
  const Migration m = *migration_;
  try {
    const Reply keys = admin(node(m.source), {"CLUSTER", "GETKEYSINSLOT", std::to_string(m.slot),
                                              std::to_string(max_keys)});
    const auto& names = detail::expect_array(keys, "CLUSTER GETKEYSINSLOT");
    if (names.empty()) return 0;
    std::vector<std::string> migrate = {"MIGRATE", "127.0.0.1", std::to_string(m.target), "", "0",
                                        "5000",    "KEYS"};
    for (const Reply& name : names) migrate.push_back(detail::expect_string(name, "key"));
    const Reply reply = admin(node(m.source), migrate);
    // NOKEY: every one of them expired in the meantime.
    return reply.str == "NOKEY" ? 0 : names.size();
  } catch (const Error& e) {
    fail("migrating keys of slot " + std::to_string(m.slot) +
         " from 127.0.0.1:" + std::to_string(m.source) +
         " to 127.0.0.1:" + std::to_string(m.target) + " failed: " + e.what());
  }
}

void RedisCluster::finish_migration() {
  if (!migration_) throw std::logic_error("RedisCluster: no migration in progress");
  const Migration m = *migration_;
  const std::string s = std::to_string(m.slot);
  const std::string target_id = node_id(m.target);
  // New keys of the slot go to the target (the source answers ASK for a key it does not
  // hold), so the source only ever loses keys.
  std::string why;
  const bool drained = wait_until(
      [&] {
        try {
          migrate_keys(100);
          const long long left = detail::expect_integer(
              admin(node(m.source), {"CLUSTER", "COUNTKEYSINSLOT", s}), "CLUSTER COUNTKEYSINSLOT");
          why = std::to_string(left) + " keys are left";
          return left == 0;
        } catch (const Error& e) {
          why = e.what();
          return false;
        }
      },
      std::chrono::seconds(60));
  if (!drained) fail("slot " + s + " could not be emptied on the source: " + why);
  std::vector<int> order = {m.target, m.source};
  for (int port : master_ports()) {
    if (port != m.target && port != m.source) order.push_back(port);
  }
  for (int port : order) {
    try {
      admin(node(port), {"CLUSTER", "SETSLOT", s, "NODE", target_id});
    } catch (const Error& e) {
      fail("CLUSTER SETSLOT " + s + " NODE <127.0.0.1:" + std::to_string(m.target) +
           "> on 127.0.0.1:" + std::to_string(port) + " failed: " + e.what());
    }
  }
  migration_.reset();
  const bool agreed = wait_until(
      [&] {
        why = unstable_reason();
        if (!why.empty()) return false;
        try {
          if (master_port_for_slot(m.slot) == m.target) return true;
          why = "slot " + s + " is still not on the target";
        } catch (const std::exception& e) {
          why = e.what();
        }
        return false;
      },
      std::chrono::seconds(60));
  if (!agreed) fail("the nodes did not agree on slot " + s + "'s new owner within 60 s: " + why);
}

void RedisCluster::migrate_slot(int slot, int to_port) {
  begin_migration(slot, to_port);
  finish_migration();
}

int RedisCluster::failover(int master_port) {
  const int replica = replica_port_of(master_port);
  const std::string who = "127.0.0.1:" + std::to_string(replica);
  wait_stable();
  std::string why;
  // A manual failover that does not complete in time (CLUSTER_MF_TIMEOUT, 5 s) is dropped
  // silently: ask again then.
  bool promoted = false;
  for (int attempt = 0; attempt < 3 && !promoted; ++attempt) {
    try {
      admin(node(replica), {"CLUSTER", "FAILOVER"});
    } catch (const Error& e) {
      fail("CLUSTER FAILOVER on " + who + " failed: " + e.what());
    }
    promoted = wait_until(
        [&] {
          try {
            const std::string role = role_of(node(replica)).role;
            why = "its role is " + role;
            return role == "master";
          } catch (const std::exception& e) {
            why = e.what();
            return false;
          }
        },
        std::chrono::seconds(10));
  }
  if (!promoted) fail("CLUSTER FAILOVER did not promote " + who + ": " + why);
  const bool settled = wait_until(
      [&] {
        try {
          const Role old = role_of(node(master_port));
          if (old.role != "slave" || old.master_port != replica || old.link_state != "connected") {
            why = "the old master 127.0.0.1:" + std::to_string(master_port) + " is " + old.role +
                  " of " + std::to_string(old.master_port) + " (" + old.link_state + ")";
            return false;
          }
        } catch (const std::exception& e) {
          why = e.what();
          return false;
        }
        why = unstable_reason();
        return why.empty();
      },
      std::chrono::seconds(60));
  if (!settled) fail("after the failover to " + who + " the cluster did not settle: " + why);
  return replica;
}

std::string RedisCluster::logs() const {
  std::string text;
  for (const auto& n : nodes_) {
    const int port = n->port();
    const std::string role = describe_role(*n);
    text += "--- node 127.0.0.1:" + std::to_string(port) + " (" + role + "), log tail ---\n" +
            tail(n->log(), 40) + "\n";
  }
  for (const auto& n : nodes_) {
    if (!n->running()) continue;
    try {
      text += "--- CLUSTER NODES as 127.0.0.1:" + std::to_string(n->port()) + " sees it ---\n" +
              admin(*n, {"CLUSTER", "NODES"}).str;
      break;
    } catch (const std::exception&) {
    }
  }
  return text;
}

void RedisCluster::fail(const std::string& what) const {
  throw std::runtime_error("RedisCluster: " + what + "\n" + logs());
}

}  // namespace fairsem::test
