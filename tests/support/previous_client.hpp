#pragma once

// A client of an earlier fairsem release on one semaphore, for the tests of a rolling upgrade:
// that release's semaphore scripts (tests/integration/previous_release/VERSION/), composed as
// its build composed them (the shared parts, then the operation) and run with EVALSHA (loaded
// again after NOSCRIPT, as that release does where it cannot use functions) on a connection of
// its own, with that release's keys and arguments. What that release's C++
// client did around the scripts (retries, wake-ups) is the caller's: PreviousReleaseTest
// drives single calls, the stress worker (tests/stress/previous_worker.cpp) a whole client.

#include <chrono>
#include <string>
#include <vector>

#include "fairsem/connection_options.hpp"
#include "fairsem/impl/net/connection.hpp"

namespace fairsem::test {

/// The release before this one: the version of the clients a rolling upgrade replaces.
inline constexpr const char* kPreviousRelease = "0.3.1";

class PreviousClient {
 public:
  /// `version`: a directory under previous_release/ ("0.2.0", "0.3.1", "0.4.0"). Throws
  /// std::runtime_error when one of its scripts is missing.
  PreviousClient(const std::string& version, const ConnectionOptions& options,
                 const std::string& key_prefix, const std::string& name, long long limit,
                 std::chrono::milliseconds lease);

  /// acquire ID MODE OWNER_INFO TICKET UNITS [CLIENT]: {state, ticket, deadline, position, now,
  /// slot...} (state 1 granted, 2 queued, 0 full (try), 3 evicted, 4 too large; from 0.4.0 on,
  /// {-7, model, MODEL, model_by} on a semaphore of a later data model). TICKET 0: a
  /// first call, or its retry after a lost reply (the script finds the entry the lost run
  /// made). CLIENT (0.3.x): the inbox that wakes this waiter, `inbox(CLIENT)`; empty: its own
  /// wake list, as 0.2.0 waits.
  detail::Reply acquire(const std::string& id, const std::string& mode, long long ticket = 0,
                        long long units = 1, const std::string& client = "");
  /// release ID TICKET RECEIPT_MS [extra...]: {state} (1 released, 2 left, 0 gone, 3 released
  /// by an earlier run). `extra`: {"leaving"} or {"keep", "K"}.
  detail::Reply release(const std::string& id, long long ticket,
                        const std::vector<std::string>& extra = {});
  /// renew ID TICKET (0.3.1 and later): {now, deadline, state}.
  detail::Reply renew(const std::string& id, long long ticket);
  /// What that release's waker did for a waiter that queued without a Client's inbox: BRPOP on
  /// its own wake list (on a second connection). Nil on timeout.
  detail::Reply wait_for_wake_up(const std::string& id, std::chrono::milliseconds timeout);
  /// The same on a Client's inbox (0.3.x): {key, "ID MESSAGE"}, or nil on timeout.
  detail::Reply wait_on_inbox(const std::string& client, std::chrono::milliseconds timeout);

  /// The receipt's lifetime this client passes to release.
  static constexpr std::chrono::milliseconds kReceipt{60'000};
  const std::vector<std::string>& keys() const noexcept { return keys_; }
  const std::string& version() const noexcept { return version_; }

 private:
  /// One operation's script: its body, and the SHA1 the server gave it.
  struct Loaded {
    std::string name;
    std::string body;
    std::string sha1;
  };
  Loaded load(const std::string& name, const std::string& body);
  detail::Reply eval(const Loaded& script, const std::string& operation,
                     const std::vector<std::string>& args);
  detail::Reply brpop(const std::string& key, std::chrono::milliseconds timeout);

  std::string version_;
  std::vector<std::string> keys_;
  std::string limit_;
  std::string lease_;
  detail::Connection conn_;
  detail::Connection waker_;
  Loaded acquire_;
  Loaded release_;
  Loaded renew_;
};

}  // namespace fairsem::test
