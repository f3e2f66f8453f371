#pragma once

// The implementation files of fairsem/impl/threads/ (the library's threads: the owned thread,
// the Executor, the Notifier, the thread reaper, fork()), listed once: src/threads.cpp compiles
// them into libfairsem, and fairsem/impl/header_only.hpp includes them in header-only mode. A new
// implementation file of this folder is added here and nowhere else.

#include "fairsem/impl/threads/executor-inl.hpp"
#include "fairsem/impl/threads/fork-inl.hpp"
#include "fairsem/impl/threads/notifier-inl.hpp"
#include "fairsem/impl/threads/owned_thread-inl.hpp"
#include "fairsem/impl/threads/thread_reaper-inl.hpp"
