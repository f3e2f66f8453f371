#pragma once

// WakerGroup (waker_group.hpp).

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/wake/waker_group.hpp"

#include <algorithm>
#include <utility>

#include "fairsem/impl/wake/waker.hpp"

namespace fairsem::detail {

FAIRSEM_INLINE void WakerGroup::add(const std::shared_ptr<Waker>& waker) {
  std::lock_guard<std::mutex> lock(mu_);
  wakers_.erase(std::remove_if(wakers_.begin(), wakers_.end(),
                               [](const std::weak_ptr<Waker>& w) { return w.expired(); }),
                wakers_.end());
  wakers_.push_back(waker);
}

FAIRSEM_INLINE std::vector<std::shared_ptr<Waker>> WakerGroup::others(const Waker* from) {
  std::vector<std::shared_ptr<Waker>> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::weak_ptr<Waker>& weak : wakers_) {
    std::shared_ptr<Waker> waker = weak.lock();
    if (waker && waker.get() != from) out.push_back(std::move(waker));
  }
  return out;
}

FAIRSEM_INLINE bool WakerGroup::offer(const Waker* from, const std::string& key,
                                      const std::string& message) {
  const std::vector<std::shared_ptr<Waker>> wakers = others(from);
  return std::any_of(wakers.begin(), wakers.end(), [&](const std::shared_ptr<Waker>& waker) {
    return waker->take_offer(key, message);
  });
}

FAIRSEM_INLINE std::optional<std::string> WakerGroup::claim(const Waker* from,
                                                            const std::string& key) {
  for (const std::shared_ptr<Waker>& waker : others(from)) {
    if (std::optional<std::string> message = waker->take_unclaimed(key)) return message;
  }
  return std::nullopt;
}

}  // namespace fairsem::detail
