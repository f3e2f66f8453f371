#pragma once

// The model checker's system under test: a real redis-server whose clock the test sets
// (libfaketime, frozen at whole seconds the test writes to a file), the generated semaphore
// scripts run with the arguments the library sends, and what their keys hold after each run.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fairsem/impl/net/connection.hpp"
#include "redis_server.hpp"
#include "semaphore_model.hpp"

namespace fairsem::model {

/// What a semaphore's keys hold, read after a script run.
struct RawState {
  std::map<std::string, std::string> meta, info, slots;
  std::optional<std::string> counter;
  std::vector<std::pair<std::string, long long>> owner, time;  // in score order
  std::vector<long long> free;
  // PTTL of each of the seven keys that exist (owner time counter meta info slots free)
  std::map<std::string, long long> ttl;
  // PTTL of every other key of the semaphore (wake lists, inboxes, receipts buckets)
  std::map<std::string, long long> other_ttl;
  std::map<std::string, std::string> markers;  // id -> the first element of its wake list
  // Data model 3 (tenants.lua): OWNER:tenants and OWNER:idle (in score order), each tenant's
  // OWNER:queue:T, META:weights, and the PTTL of each of these keys.
  std::vector<std::pair<std::string, double>> tenants, idle;
  std::map<std::string, std::vector<std::pair<std::string, long long>>> queues;
  std::map<std::string, std::string> weights;
  std::map<std::string, long long> fair_ttl;
};

class Driver {
 public:
  /// Starts the server (throws with the reason when libfaketime is missing).
  Driver();
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  /// A new semaphore (its own key prefix) at a whole second after every time used so far:
  /// returns the server's clock, ms.
  long long new_case();
  /// Sets the server's clock (ms, a whole second).
  void set_clock(long long now_ms);

  /// Runs `call` with the generated script, ARGV as the library sends it.
  Reply run(const Call& call);
  /// The exact ARGV of `call`, for messages.
  static std::vector<std::string> argv(const Call& call);
  /// Sets meta's `model` as a later data model leaves it, or puts back the one it had (3 when
  /// `fair`, else none).
  void set_later_model(bool later, bool fair);

  /// The semaphore's keys now; `ids`: whose wake lists to read.
  RawState read(const std::vector<std::string>& ids);
  /// Every key of the semaphore with its DUMP and PTTL: equal before and after a run that
  /// wrote nothing.
  std::map<std::string, std::string> dump();

  const std::vector<std::string>& keys() const { return keys_; }
  std::string server_name() const;

 private:
  void read_fair(const std::vector<std::string>& keys, RawState& s);

  std::string clock_file_;
  std::unique_ptr<test::RedisServer> server_;
  std::unique_ptr<detail::Connection> conn_;
  std::vector<std::string> keys_;
  std::string prefix_;
  long long latest_ms_ = 0;
  int cases_ = 0;
};

}  // namespace fairsem::model
