#include "redis_sentinel.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>
#include <utility>

#include "fairsem/errors.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/text.hpp"
#include "node_admin.hpp"
#include "wait.hpp"

namespace fairsem::test {

namespace {

using detail::Reply;

std::string address(int port) { return "127.0.0.1:" + std::to_string(port); }

using Fields = std::map<std::string, std::string>;

/// A RESP2 flat [name, value, name, value, ...] array (SENTINEL MASTER and the entries of
/// SENTINEL REPLICAS / SENTINEL SENTINELS) as a map.
Fields to_fields(const Reply& reply, std::string_view what) {
  Fields fields;
  const auto& items = detail::expect_array(reply, what);
  for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
    fields[detail::expect_string(items[i], what)] = detail::expect_string(items[i + 1], what);
  }
  return fields;
}

std::vector<Fields> to_field_list(const Reply& reply, std::string_view what) {
  std::vector<Fields> list;
  for (const Reply& item : detail::expect_array(reply, what)) list.push_back(to_fields(item, what));
  return list;
}

int master_port_from(const RedisServer& sentinel) {
  const Reply reply =
      admin(sentinel, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelGroup::kMasterName});
  const auto& addr = detail::expect_array(reply, "SENTINEL GET-MASTER-ADDR-BY-NAME", 2);
  return std::stoi(detail::expect_string(addr[1], "the master's port"));
}

}  // namespace

SentinelGroup::SentinelGroup() {
  // A full resync (the first one, and the old master's after a failover: it has taken writes,
  // sentinel's hello messages at least, that the new master never saw) would wait 5 s for
  // more replicas by default.
  const std::vector<std::string> args = {"--repl-diskless-sync-delay", "0"};
  data_.push_back(std::make_unique<RedisServer>(args));
  const int master = data_[0]->port();
  std::vector<std::string> replica_args = args;
  replica_args.insert(replica_args.end(), {"--replicaof", "127.0.0.1", std::to_string(master)});
  data_.push_back(std::make_unique<RedisServer>(replica_args));
  const RedisServer& replica = *data_[1];
  // Sentinels find replicas in the master's INFO: let the replica connect first.
  std::string why;
  if (!wait_until(
          [&] {
            try {
              const Role r = role_of(replica);
              why = "replica link state '" + r.link_state + "'";
              return r.master_port == master && r.link_state == "connected";
            } catch (const std::exception& e) {
              why = e.what();
              return false;
            }
          },
          std::chrono::seconds(30))) {
    fail("the replica did not connect to its master: " + why);
  }
  const std::string config = std::string("sentinel monitor ") + kMasterName + " 127.0.0.1 " +
                             std::to_string(master) + " 2\n" + "sentinel down-after-milliseconds " +
                             kMasterName + " 1000\n" + "sentinel failover-timeout " + kMasterName +
                             " 10000\n" + "sentinel parallel-syncs " + kMasterName + " 1\n";
  for (int i = 0; i < 3; ++i) {
    sentinels_.push_back(
        std::make_unique<RedisServer>(std::vector<std::string>{"--sentinel"}, config));
    retune(sentinels_.back()->port());
  }
  wait_healthy();
}

SentinelGroup::~SentinelGroup() {
  for (auto& s : sentinels_) s->kill();
  for (auto& d : data_) d->kill();
}

void SentinelGroup::retune(int port) const {
  try {
    // A sentinel turns a replica that reports itself master back into a replica (REPLICAOF,
    // +convert-to-slave) unless it learns of the failover within 4 publish periods. At 250 ms
    // that was 1 s, and under TLS and a sanitizer the leader's new configuration once reached a
    // sentinel 197 ms later than that: it undid the failover. 500 ms leaves 2 s.
    admin(node(port), {"SENTINEL", "DEBUG", "info-period", "250", "publish-period", "500"});
  } catch (const ReplyError&) {
    // Before Redis 7.0 there is no SENTINEL DEBUG: the default periods only make it slower
    // (failover() makes up for the slowest step).
    tuned_ = false;
  }
}

std::string SentinelGroup::url() const {
  // The sentinels and the data nodes were started alike: one's TLS settings are every one's.
  ConnectionOptions options = sentinels_.front()->options();
  options.sentinel_master = kMasterName;
  for (const auto& s : sentinels_) options.sentinels.push_back({"127.0.0.1", s->port()});
  return options.redacted_url();  // nothing to hide: no password
}

std::vector<int> SentinelGroup::sentinel_ports() const {
  std::vector<int> ports;
  for (const auto& s : sentinels_) ports.push_back(s->port());
  return ports;
}

std::vector<int> SentinelGroup::data_ports() const { return {data_[0]->port(), data_[1]->port()}; }

int SentinelGroup::master_port() const {
  std::string errors;
  for (const auto& s : sentinels_) {
    if (!s->running()) continue;
    try {
      return master_port_from(*s);
    } catch (const std::exception& e) {
      errors += "\n  sentinel " + address(s->port()) + ": " + e.what();
    }
  }
  throw std::runtime_error("SentinelGroup: no sentinel named the master" + errors);
}

int SentinelGroup::replica_port() const {
  const int master = master_port();
  return data_[0]->port() == master ? data_[1]->port() : data_[0]->port();
}

RedisServer& SentinelGroup::node(int port) {
  return const_cast<RedisServer&>(std::as_const(*this).node(port));
}

const RedisServer& SentinelGroup::node(int port) const {
  for (const auto* group : {&data_, &sentinels_}) {
    for (const auto& n : *group) {
      if (n->port() == port) return *n;
    }
  }
  throw std::out_of_range("SentinelGroup: no process on port " + std::to_string(port));
}

std::string SentinelGroup::unhealthy_reason(int master, int replica) const {
  try {
    const Role m = role_of(node(master));
    if (m.role != "master") return address(master) + " is " + m.role + ", not master";
    const Role r = role_of(node(replica));
    if (r.role != "slave" || r.master_port != master || r.link_state != "connected") {
      return address(replica) + " is " + r.role + " of " + std::to_string(r.master_port) +
             " with link '" + r.link_state + "', not a connected replica of " +
             std::to_string(master);
    }
  } catch (const std::exception& e) {
    return e.what();
  }
  for (const auto& s : sentinels_) {
    if (!s->running()) continue;
    const std::string who = "sentinel " + address(s->port());
    try {
      const int named = master_port_from(*s);
      if (named != master) return who + " names " + std::to_string(named) + " as master";
      const Fields info =
          to_fields(admin(*s, {"SENTINEL", "MASTER", kMasterName}), "SENTINEL MASTER");
      if (info.at("flags") != "master") return who + ": master flags " + info.at("flags");
      if (info.at("num-other-sentinels") != "2") {
        return who + " knows " + info.at("num-other-sentinels") + " other sentinels";
      }
      const auto replicas =
          to_field_list(admin(*s, {"SENTINEL", "REPLICAS", kMasterName}), "SENTINEL REPLICAS");
      if (replicas.size() != 1) {
        return who + " lists " + std::to_string(replicas.size()) + " replicas";
      }
      const Fields& rep = replicas[0];
      if (rep.at("port") != std::to_string(replica) || rep.at("flags") != "slave" ||
          rep.at("master-link-status") != "ok" || rep.at("master-port") != std::to_string(master)) {
        return who + " sees replica " + rep.at("ip") + ":" + rep.at("port") + " flags " +
               rep.at("flags") + ", link " + rep.at("master-link-status") + ", master port " +
               rep.at("master-port");
      }
      const auto others =
          to_field_list(admin(*s, {"SENTINEL", "SENTINELS", kMasterName}), "SENTINEL SENTINELS");
      for (const auto& other : sentinels_) {
        if (other == s) continue;
        const auto found = std::find_if(others.begin(), others.end(), [&](const Fields& f) {
          return f.at("port") == std::to_string(other->port());
        });
        if (found == others.end()) return who + " does not know " + address(other->port());
        if (other->running() && found->at("flags") != "sentinel") {
          return who + " sees " + address(other->port()) + " as " + found->at("flags");
        }
      }
    } catch (const std::out_of_range&) {
      return who + ": a field is missing from its SENTINEL replies";
    } catch (const std::exception& e) {
      return who + ": " + e.what();
    }
  }
  return "";
}

std::string SentinelGroup::replica_lag(int master) const {
  // A replica reported "connected" may not have received (or acknowledged) the stream yet, and
  // then a forced failover loses writes and WAIT returns 0. A PUBLISH on this connection moves
  // its replication offset to the end of the stream; WAIT returns once the replica has
  // acknowledged that far.
  try {
    ConnectionOptions options = node(master).options();
    options.reconnect_attempts = 1;
    detail::Connection conn(options);
    conn.command({"PUBLISH", "__fairsem_harness__", "sync"});
    const long long acked = detail::expect_integer(
        conn.command({"WAIT", "1", "1000"}, std::chrono::milliseconds(3000)), "WAIT");
    if (acked >= 1) return "";
    return "WAIT 1 1000 on the master " + address(master) + " returned " + std::to_string(acked);
  } catch (const std::exception& e) {
    return e.what();
  }
}

void SentinelGroup::wait_healthy(int timeout_ms) const {
  std::string why;
  if (!wait_until(
          [&] {
            int master = 0;
            try {
              master = master_port();
            } catch (const std::exception& e) {
              why = e.what();
              return false;
            }
            const int replica = data_[0]->port() == master ? data_[1]->port() : data_[0]->port();
            why = unhealthy_reason(master, replica);
            if (why.empty()) why = replica_lag(master);
            return why.empty();
          },
          std::chrono::milliseconds(timeout_ms))) {
    fail("the sentinel group did not become healthy within " + std::to_string(timeout_ms) +
         " ms: " + why);
  }
}

void SentinelGroup::demote_old_master(int old_master, int new_master) const {
  try {
    if (role_of(node(old_master)).role != "master") return;
    for (const auto& s : sentinels_) {
      if (s->running() && master_port_from(*s) != new_master) return;
    }
    admin(node(old_master), {"REPLICAOF", "127.0.0.1", std::to_string(new_master)});
  } catch (const std::exception&) {
    // Not there yet: the next round tries again, and the failure message says what is wrong.
  }
}

long long SentinelGroup::lowest_config_epoch() const {
  long long lowest = -1;
  for (const auto& s : sentinels_) {
    if (!s->running()) continue;
    const Fields info =
        to_fields(admin(*s, {"SENTINEL", "MASTER", kMasterName}), "SENTINEL MASTER");
    const long long epoch = std::stoll(info.at("config-epoch"));
    if (lowest < 0 || epoch < lowest) lowest = epoch;
  }
  return lowest;
}

void SentinelGroup::ask_failover(int sentinel) const {
  std::string why;
  // INPROG: a failover is still running. NOGOODSLAVE: the sentinel has not yet seen the
  // replica healthy in a fresh INFO. Both pass.
  const bool started = wait_until(
      [&] {
        try {
          admin(node(sentinel), {"SENTINEL", "FAILOVER", kMasterName});
          return true;
        } catch (const ReplyError& e) {
          why = e.what();
          if (detail::starts_with(e.server_message(), "INPROG") ||
              detail::starts_with(e.server_message(), "NOGOODSLAVE")) {
            return false;
          }
          fail("SENTINEL FAILOVER on " + address(sentinel) + " failed: " + why);
        }
      },
      std::chrono::seconds(30));
  if (!started) fail("SENTINEL FAILOVER was refused for 30 s: " + why);
}

bool SentinelGroup::failed_back(int old_master, int new_master, long long epoch_before) const {
  // A sentinel that has seen the failover's epoch but not yet its configuration can turn the
  // promoted replica back into a replica of the old master (+convert-to-slave); the sentinels
  // then fail over back to the old master in a newer epoch. The group is healthy again, around
  // the old master, and nothing more will happen by itself.
  try {
    return unhealthy_reason(old_master, new_master).empty() && lowest_config_epoch() > epoch_before;
  } catch (const std::exception&) {
    return false;
  }
}

int SentinelGroup::failover() {
  wait_healthy();
  const int old_master = master_port();
  const int new_master = replica_port();
  int asked = 0;
  for (const auto& s : sentinels_) {
    if (s->running()) {
      asked = s->port();
      break;
    }
  }
  std::string why;
  for (int asks = 1; asks <= kMaxFailoverAsks; ++asks) {
    if (asks > 1) wait_healthy();
    const long long epoch_before = lowest_config_epoch();
    ask_failover(asked);
    bool back = false;
    const bool done = wait_until(
        [&] {
          why = unhealthy_reason(new_master, old_master);
          if (why.empty()) return true;
          if (!tuned_) demote_old_master(old_master, new_master);
          back = failed_back(old_master, new_master, epoch_before);
          return back;
        },
        std::chrono::seconds(60));
    if (done && !back) break;
    if (!done || asks == kMaxFailoverAsks) {
      fail("the failover from " + address(old_master) + " to " + address(new_master) +
           " did not complete within 60 s (SENTINEL FAILOVER asked " + std::to_string(asks) +
           " times" + (back ? ", the sentinels failed back each time" : "") + "): " + why);
    }
  }
  wait_healthy();  // and the old master, now a replica, has caught up
  return new_master;
}

std::string SentinelGroup::logs() const {
  std::string text;
  for (const auto& n : data_) {
    const std::string role = describe_role(*n);
    text += "--- data node " + address(n->port()) + " (" + role + "), log tail ---\n" +
            tail(n->log(), 30) + "\n";
  }
  for (const auto& s : sentinels_) {
    text += "--- sentinel " + address(s->port()) + (s->running() ? "" : " (stopped)") +
            ", log tail ---\n" + tail(s->log(), 40) + "\n";
  }
  return text;
}

void SentinelGroup::fail(const std::string& what) const {
  throw std::runtime_error("SentinelGroup: " + what + "\n" + logs());
}

}  // namespace fairsem::test
