#pragma once

// WakerGroup: the wakers of one Client, which hand each other the wake-ups one pops for the
// other's subscriptions. Internal. Defined in waker_group-inl.hpp.

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace fairsem::detail {

class Waker;

/// The wakers of one Client (Runtime). A slot's inbox can be in two of their BRPOPs for a while
/// (Runtime::waker: a slot forgotten while a waiter was being given its waker, then given to
/// another waker after a failover), so a wake-up one of them pops can be for a subscription of
/// the other: a waker that pops one no subscription of its own listens for offers it to the
/// others, and a subscription takes one another waker kept for it. Holds the wakers weakly.
class WakerGroup {
 public:
  void add(const std::shared_ptr<Waker>& waker);
  /// Hands {`key`, `message`} to a subscription listening through another waker than `from`:
  /// true if one took it.
  bool offer(const Waker* from, const std::string& key, const std::string& message);
  /// Takes the wake-up for `key` that another waker than `from` keeps unclaimed, if any.
  std::optional<std::string> claim(const Waker* from, const std::string& key);

 private:
  /// The wakers but `from` (those still alive), without the group's lock held after.
  std::vector<std::shared_ptr<Waker>> others(const Waker* from);

  std::mutex mu_;
  std::vector<std::weak_ptr<Waker>> wakers_;
};

}  // namespace fairsem::detail
