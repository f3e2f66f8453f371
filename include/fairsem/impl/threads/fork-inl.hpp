#pragma once

#include <fmt/format.h>
#include "fairsem/impl/config.hpp"

#include <unistd.h>

#include <atomic>
#include <utility>

#include "fairsem/errors.hpp"
#include "fairsem/impl/threads/fork.hpp"

namespace fairsem::detail {

namespace fork_helpers {

// The abandoned objects: a list that is only ever pushed to, never freed, reachable from a
// static pointer (so that a leak checker does not report them either).
struct Abandoned {
  std::shared_ptr<void> object;
  Abandoned* next;
};

FAIRSEM_INLINE std::atomic<Abandoned*>& abandoned() {
  static std::atomic<Abandoned*> head{nullptr};
  return head;
}

}  // namespace fork_helpers

FAIRSEM_INLINE OwnerProcess::OwnerProcess() noexcept : pid_(::getpid()) {}

FAIRSEM_INLINE bool OwnerProcess::here() const noexcept { return ::getpid() == pid_; }

FAIRSEM_INLINE void OwnerProcess::check(std::string_view what) const {
  if (here()) return;
  throw ForkedProcessError(fmt::format(
      "fairsem: {} belongs to process {}, and process {} is a child made by fork(): a child "
      "cannot use its parent's connections and threads; open a Client (and its semaphores) in "
      "the child",
      what, pid_, ::getpid()));
}

FAIRSEM_INLINE void abandon(std::shared_ptr<void> object) noexcept {
  if (!object) return;
  auto& head = fork_helpers::abandoned();
  try {
    auto* node = new fork_helpers::Abandoned{std::move(object), head.load()};
    while (!head.compare_exchange_weak(node->next, node)) {
    }
  } catch (...) {
    // Out of memory: `object` is released as usual.
  }
}

}  // namespace fairsem::detail
