#pragma once

// InFlight (in_flight.hpp): a semaphore's asynchronous requests under way.

#include "fairsem/impl/config.hpp"

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "fairsem/impl/semaphore/in_flight.hpp"

namespace fairsem::detail {

FAIRSEM_INLINE InFlight::Step::Step(InFlight& in_flight) : in_flight_(in_flight) {
  std::lock_guard<std::mutex> lock(in_flight_.mu);
  ++in_flight_.steps;
}

FAIRSEM_INLINE InFlight::Step::~Step() {
  {
    std::lock_guard<std::mutex> lock(in_flight_.mu);
    --in_flight_.steps;
  }
  in_flight_.cv.notify_all();
}

FAIRSEM_INLINE bool InFlight::add(const std::shared_ptr<AsyncAcquire>& request) {
  std::lock_guard<std::mutex> lock(mu);
  if (closing) return false;
  pending.emplace(request.get(), request);
  return true;
}

FAIRSEM_INLINE void InFlight::remove(AsyncAcquire* request) {
  std::shared_ptr<AsyncAcquire> owned;  // let go of after the lock (the caller holds one too)
  {
    std::lock_guard<std::mutex> lock(mu);
    const auto it = pending.find(request);
    if (it == pending.end()) return;
    owned = std::move(it->second);
    pending.erase(it);
  }
  cv.notify_all();
}

FAIRSEM_INLINE std::vector<std::shared_ptr<AsyncAcquire>> InFlight::snapshot(bool close) {
  std::vector<std::shared_ptr<AsyncAcquire>> requests;
  std::lock_guard<std::mutex> lock(mu);
  if (close) closing = true;
  requests.reserve(pending.size());
  for (const auto& entry : pending) requests.push_back(entry.second);
  return requests;
}

FAIRSEM_INLINE void InFlight::wait_idle() {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return pending.empty() && steps == 0; });
}
}  // namespace fairsem::detail
