#pragma once

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/threads/notifier.hpp"

namespace fairsem::detail {

namespace notifier_helpers {

FAIRSEM_INLINE thread_local Notifier* this_threads_notifier = nullptr;

}  // namespace notifier_helpers

FAIRSEM_INLINE Notifier* Notifier::of_this_thread() noexcept {
  return notifier_helpers::this_threads_notifier;
}

FAIRSEM_INLINE void Notifier::set_for_this_thread(Notifier* notifier) noexcept {
  notifier_helpers::this_threads_notifier = notifier;
}

}  // namespace fairsem::detail
