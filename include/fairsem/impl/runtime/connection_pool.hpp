#pragma once

// A Client's pool of connections for script calls, per cluster slot (-1 standalone): at most
// max_connections open at once, idle ones kept for reuse. A thread that holds one never waits
// for another (it could wait for itself). Every call to Redis takes one, so it is where a child
// made by fork() is stopped (fork.hpp). Starts no thread. Internal.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "fairsem/connection_options.hpp"
#include "fairsem/impl/net/connection.hpp"
#include "fairsem/impl/net/discovery.hpp"
#include "fairsem/impl/threads/fork.hpp"

namespace fairsem::detail {

class ConnectionPool {
 public:
  /// Connects nothing. `discovery`: where a routed deployment's connections go (null
  /// standalone). Owned by the process running now.
  ConnectionPool(ConnectionOptions options, std::shared_ptr<Discovery> discovery,
                 std::size_t max_connections);
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  /// A connection for commands on cluster hash slot `slot`: an idle one, else a new one (which
  /// may throw what connecting throws), waiting while max_connections are taken unless this
  /// thread holds one already. Give it back with give_back, on the same thread. With
  /// `deadline`, neither the wait nor connecting lasts past it: TimeoutError then. In a child
  /// made by fork(), throws ForkedProcessError instead.
  std::unique_ptr<Connection> take(
      int slot, std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);
  /// Back to the pool (closed if its slot holds enough idle ones).
  void give_back(std::unique_ptr<Connection> conn) noexcept;
  /// True while this thread holds a connection of any pool: waiting then for work that needs
  /// one could wait for ever at max_connections.
  static bool this_thread_holds_a_connection() noexcept;
  /// The process the pool (and the Client it belongs to) belongs to.
  const OwnerProcess& owner() const noexcept { return owner_; }

 private:
  /// With mu_ held: closes an idle connection of any slot; false if there is none.
  bool close_an_idle_one();

  const OwnerProcess owner_;
  const ConnectionOptions options_;
  const std::shared_ptr<Discovery> discovery_;
  const std::size_t max_connections_;

  std::mutex mu_;  // guards idle_ and open_
  std::condition_variable cv_;
  std::unordered_map<int, std::vector<std::unique_ptr<Connection>>> idle_;
  std::size_t open_ = 0;  // connections of the pool, idle or taken
};

}  // namespace fairsem::detail
