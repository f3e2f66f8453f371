#include "model_driver.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "fairsem/impl/protocol/scripts.hpp"
#include "fairsem/version.hpp"
#include "test_env.hpp"

namespace fairsem::model {

namespace {

using RedisReply = detail::Reply;

// Debian's redis-server allocates with jemalloc, which asks for the time while libfaketime
// starts (libfaketime then refuses every clock call): glibc's debugging malloc, preloaded
// first, takes the allocations instead. Servers built with MALLOC=libc need none.
std::string preload() {
  const std::string faketime = test::find_libfaketime();
  if (faketime.empty()) {
    throw std::runtime_error(
        "the model checker sets the server's clock with libfaketime: install Debian's "
        "faketime package (scripts/lib.sh installs it)");
  }
  for (const char* path : {"/lib/x86_64-linux-gnu/libc_malloc_debug.so.0",
                           "/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0",
                           "/lib/aarch64-linux-gnu/libc_malloc_debug.so.0"}) {
    if (::access(path, R_OK) == 0) return std::string(path) + " " + faketime;
  }
  return faketime;
}

long long number(const RedisReply& r) {
  if (r.type == RedisReply::Type::integer) return r.integer;
  return std::llround(std::stod(r.str));
}

std::map<std::string, std::string> hash(const RedisReply& r) {
  std::map<std::string, std::string> out;
  for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2) {
    out[r.elements[i].str] = r.elements[i + 1].str;
  }
  return out;
}

std::vector<std::pair<std::string, long long>> zset(const RedisReply& r) {
  std::vector<std::pair<std::string, long long>> out;
  for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2) {
    out.emplace_back(r.elements[i].str, number(r.elements[i + 1]));
  }
  return out;
}

const char* const kSeven[] = {"owner", "time", "counter", "meta", "info", "slots", "free"};
const int kSevenIndex[] = {0, 1, 2, 3, 4, 7, 8};  // their places in keys()

}  // namespace

Driver::Driver() {
  char tmpl[] = "/tmp/fairsem-model-clock-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  ::close(fd);
  clock_file_ = tmpl;
  latest_ms_ = std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count() *
               1000;
  set_clock(latest_ms_);
  server_ = std::make_unique<test::RedisServer>(
      std::vector<std::string>{},
      test::ServerEnvironment{{"LD_PRELOAD=" + preload(), "FAKETIME_TIMESTAMP_FILE=" + clock_file_,
                               "FAKETIME_NO_CACHE=1", "FAKETIME_DONT_FAKE_MONOTONIC=1",
                               "FAKETIME_FMT=%s"}});
  conn_ = std::make_unique<detail::Connection>(server_->options());
  const long long told = number(conn_->command({"TIME"}).elements.at(0)) * 1000;
  if (told != latest_ms_) {
    throw std::runtime_error("the server's clock does not follow libfaketime: TIME says " +
                             std::to_string(told) + " ms, the test set " +
                             std::to_string(latest_ms_));
  }
}

Driver::~Driver() {
  conn_.reset();
  server_.reset();
  std::remove(clock_file_.c_str());
}

std::string Driver::server_name() const { return server_->binary(); }

long long Driver::new_case() {
  prefix_ = "m" + std::to_string(++cases_);
  keys_ = detail::semaphore_keys(prefix_, "s");
  // Each case starts at a multiple of 8,192 s, of every receipts bucket width it meets (4,096
  // or 8,192 ms) and of a second: a sequence run again (shrinking, a reproduce string) meets
  // the same bucket boundaries, so it does what it did.
  constexpr long long kAlign = 8'192'000;
  set_clock((latest_ms_ / kAlign + 1) * kAlign);
  return latest_ms_;
}

void Driver::set_clock(long long now_ms) {
  if (now_ms % 1000 != 0 || now_ms < latest_ms_) {
    throw std::logic_error("the model checker's clock moves on in whole seconds");
  }
  latest_ms_ = now_ms;
  // Written whole, then renamed into place: the server never reads half a number.
  const std::string next = clock_file_ + ".next";
  {
    std::ofstream out(next, std::ios::trunc);
    out << now_ms / 1000 << "\n";
  }
  if (std::rename(next.c_str(), clock_file_.c_str()) != 0) {
    throw std::runtime_error("cannot write the server's clock to " + clock_file_);
  }
}

std::vector<std::string> Driver::argv(const Call& c) {
  std::vector<std::string> a{c.op, std::to_string(c.limit), std::to_string(c.lease)};
  const auto add = [&a](std::initializer_list<std::string> more) {
    a.insert(a.end(), more.begin(), more.end());
  };
  if (c.op == "open") {
    add({std::to_string(c.idle_expiry)});
  } else if (c.op == "acquire") {
    // As SemaphoreCore::run_acquire sends it.
    const bool named = !c.tenant.empty();
    if (c.mode == "queue" || c.idle_expiry > 0 || c.fresh || named) {
      add({c.id, c.mode, c.info, std::to_string(c.ticket), std::to_string(c.units), c.client});
      if (c.max_waiters > 0 || c.idle_expiry > 0 || c.fresh || named) {
        add({std::to_string(c.max_waiters)});
      }
      if (c.idle_expiry > 0 || c.fresh || named) add({std::to_string(c.idle_expiry)});
      if (c.fresh || named) add({c.fresh ? "1" : "0"});
      if (named) add({c.tenant});
    } else if (c.units != 1) {
      add({c.id, c.mode, c.info, std::to_string(c.ticket), std::to_string(c.units)});
    } else if (c.ticket != 0) {
      add({c.id, c.mode, c.info, std::to_string(c.ticket)});
    } else {
      add({c.id, c.mode, c.info});
    }
  } else if (c.op == "release") {
    add({c.id, std::to_string(c.ticket), std::to_string(c.receipt_ms)});
    if (c.how == "leaving") add({"leaving"});
    if (c.how == "keep") add({"keep", std::to_string(c.units)});
  } else if (c.op == "renew") {
    for (const auto& [id, ticket] : c.permits) add({id, std::to_string(ticket)});
  } else if (c.op == "evict") {
    add({c.id});
  } else if (c.op == "resize") {
    add({std::to_string(c.new_limit)});
    if (c.idle_expiry > 0) add({std::to_string(c.idle_expiry)});
  } else if (c.op == "tenant") {
    add({c.tenant, std::to_string(c.weight)});
  }
  return a;
}

Reply Driver::run(const Call& call) {
  const std::vector<std::string> args = argv(call);
  const detail::Args keys(keys_.begin(), keys_.end());
  const detail::Args argv_views(args.begin(), args.end());
  const RedisReply r = conn_->eval(detail::scripts::semaphore_script(call.op), keys, argv_views);
  Reply out;
  for (const RedisReply& e : r.elements) {
    if (e.type == RedisReply::Type::integer) {
      out.emplace_back(e.integer);
    } else {
      out.emplace_back(e.str);
    }
  }
  return out;
}

void Driver::set_later_model(bool later, bool fair) {
  if (later) {
    conn_->command({"HSET", keys_[3], "model", "4", "model_by", "9.9.9"});
  } else if (fair) {
    conn_->command({"HSET", keys_[3], "model", "3", "model_by", FAIRSEM_VERSION_STRING});
  } else {
    conn_->command({"HDEL", keys_[3], "model", "model_by"});
  }
}

RawState Driver::read(const std::vector<std::string>& ids) {
  std::vector<detail::Args> commands{{"HGETALL", keys_[3]},
                                     {"GET", keys_[2]},
                                     {"ZRANGE", keys_[0], "0", "-1", "WITHSCORES"},
                                     {"ZRANGE", keys_[1], "0", "-1", "WITHSCORES"},
                                     {"HGETALL", keys_[4]},
                                     {"HGETALL", keys_[7]},
                                     {"ZRANGE", keys_[8], "0", "-1"}};
  for (int i : kSevenIndex) commands.push_back({"PTTL", keys_[static_cast<std::size_t>(i)]});
  const std::string pattern = prefix_ + ":*";
  commands.push_back({"KEYS", pattern});
  std::vector<std::string> lists;
  for (const std::string& id : ids) lists.push_back(keys_[5] + id);
  for (const std::string& list : lists) commands.push_back({"LINDEX", list, "0"});
  const std::vector<RedisReply> r = conn_->pipeline(commands);
  RawState s;
  s.meta = hash(r[0]);
  if (r[1].type == RedisReply::Type::string) s.counter = r[1].str;
  s.owner = zset(r[2]);
  s.time = zset(r[3]);
  s.info = hash(r[4]);
  s.slots = hash(r[5]);
  for (const RedisReply& e : r[6].elements) s.free.push_back(std::stoll(e.str));
  for (std::size_t i = 0; i < 7; ++i) {
    if (r[7 + i].integer != -2) s.ttl[kSeven[i]] = r[7 + i].integer;
  }
  std::vector<detail::Args> ttls;
  std::vector<std::string> others;
  std::vector<std::string> fair;  // the keys of data model 3
  const std::string queue = keys_[0] + ":queue:";
  for (const RedisReply& key : r[14].elements) {
    bool seven = false;
    for (int i : kSevenIndex) seven = seven || key.str == keys_[static_cast<std::size_t>(i)];
    if (key.str == keys_[0] + ":tenants" || key.str == keys_[0] + ":idle" ||
        key.str == keys_[3] + ":weights" || key.str.compare(0, queue.size(), queue) == 0) {
      fair.push_back(key.str);
    } else if (!seven) {
      others.push_back(key.str);
    }
  }
  if (!fair.empty()) read_fair(fair, s);
  for (const std::string& key : others) ttls.push_back({"PTTL", key});
  const std::vector<RedisReply> t =
      ttls.empty() ? std::vector<RedisReply>{} : conn_->pipeline(ttls);
  for (std::size_t i = 0; i < others.size(); ++i) {
    if (t[i].integer != -2) s.other_ttl[others[i]] = t[i].integer;
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (r[15 + i].type == RedisReply::Type::string) s.markers[ids[i]] = r[15 + i].str;
  }
  return s;
}

void Driver::read_fair(const std::vector<std::string>& keys, RawState& s) {
  std::vector<detail::Args> commands;
  for (const std::string& key : keys) {
    if (key == keys_[3] + ":weights") {
      commands.push_back({"HGETALL", key});
    } else {
      commands.push_back({"ZRANGE", key, "0", "-1", "WITHSCORES"});
    }
    commands.push_back({"PTTL", key});
  }
  const std::vector<RedisReply> r = conn_->pipeline(commands);
  const std::string queue = keys_[0] + ":queue:";
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const std::string& key = keys[i];
    const RedisReply& value = r[2 * i];
    s.fair_ttl[key] = r[2 * i + 1].integer;
    if (key == keys_[3] + ":weights") {
      s.weights = hash(value);
    } else if (key.compare(0, queue.size(), queue) == 0) {
      s.queues[key.substr(queue.size())] = zset(value);
    } else {
      auto& z = key == keys_[0] + ":tenants" ? s.tenants : s.idle;
      for (std::size_t j = 0; j + 1 < value.elements.size(); j += 2) {
        z.emplace_back(value.elements[j].str, std::stod(value.elements[j + 1].str));
      }
    }
  }
}

std::map<std::string, std::string> Driver::dump() {
  const std::string pattern = prefix_ + ":*";
  const RedisReply names = conn_->command({"KEYS", pattern});
  std::vector<detail::Args> commands;
  for (const RedisReply& key : names.elements) {
    commands.push_back({"DUMP", key.str});
    commands.push_back({"PTTL", key.str});
  }
  const std::vector<RedisReply> r =
      commands.empty() ? std::vector<RedisReply>{} : conn_->pipeline(commands);
  std::map<std::string, std::string> out;
  for (std::size_t i = 0; i < names.elements.size(); ++i) {
    out[names.elements[i].str] = r[2 * i].str + " ttl " + std::to_string(r[2 * i + 1].integer);
  }
  return out;
}

}  // namespace fairsem::model
