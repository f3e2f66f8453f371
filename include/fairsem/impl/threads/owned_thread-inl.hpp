#pragma once

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/threads/owned_thread.hpp"
#include "fairsem/impl/threads/thread_reaper.hpp"

namespace fairsem::detail {

FAIRSEM_INLINE OwnedThread& OwnedThread::operator=(OwnedThread&& other) noexcept {
  if (this != &other) {
    let_go();
    thread_ = std::move(other.thread_);
    retired_ = std::exchange(other.retired_, false);
  }
  return *this;
}

FAIRSEM_INLINE OwnedThread OwnedThread::take() noexcept {
  OwnedThread out;
  out.thread_ = std::move(thread_);
  out.retired_ = std::exchange(retired_, false);
  return out;
}

FAIRSEM_INLINE void OwnedThread::let_go() noexcept {
  join_or_park(thread_);
  retired_ = false;
}

}  // namespace fairsem::detail
