#pragma once

// The implementation files of fairsem/impl/wake/ (the wake-up path of waiting acquires: the Waker,
// its thread, WakeSubscription), listed once: src/wake.cpp compiles them into libfairsem, and
// fairsem/impl/header_only.hpp includes them in header-only mode. A new implementation file of this
// folder is added here and nowhere else.

#include "fairsem/impl/wake/wake_subscription-inl.hpp"
#include "fairsem/impl/wake/waker-inl.hpp"
#include "fairsem/impl/wake/waker_group-inl.hpp"
#include "fairsem/impl/wake/waker_loop-inl.hpp"
