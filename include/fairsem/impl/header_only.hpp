#pragma once

// Header-only mode's implementation: every public header, complete, then every unit of the
// library (fairsem/impl/<unit>-inl.hpp, each the whole of what src/<unit>.cpp compiles in the
// default mode), with FAIRSEM_INLINE = inline. The first public header a translation unit
// includes includes this file at its end (FAIRSEM_IMPL_PENDING keeps the headers it includes
// from doing it before they are all complete); nothing else should include it. The units
// depend on one another (a Client's runtime renews the permits of every semaphore, a semaphore
// calls through connections, the router and the waker), so every public header brings all of
// them. Besides fairsem, a translation unit needs hiredis's, fmt's and (for TLS) OpenSSL's
// headers; the program links hiredis, fmt and the threads library.
#ifndef FAIRSEM_HEADER_ONLY
#error \
    "fairsem/impl/header_only.hpp is header-only mode's; define FAIRSEM_HEADER_ONLY (or link fairsem::fairsem_header_only)"
#endif

#include "fairsem/client.hpp"
#include "fairsem/connection_options.hpp"
#include "fairsem/errors.hpp"
#include "fairsem/metrics.hpp"
#include "fairsem/permit.hpp"
#include "fairsem/semaphore.hpp"
#include "fairsem/semaphore_lock.hpp"
#include "fairsem/semaphore_options.hpp"
#include "fairsem/server_info.hpp"
#include "fairsem/version.hpp"

// The units: one per src/*.cpp (tests/CMakeLists.txt checks that none is missing).
#include "fairsem/impl/errors-inl.hpp"
#include "fairsem/impl/net/connection-inl.hpp"
#include "fairsem/impl/net/connection_connect-inl.hpp"
#include "fairsem/impl/net/connection_options-inl.hpp"
#include "fairsem/impl/net/connection_redirect-inl.hpp"
#include "fairsem/impl/net/discovery-inl.hpp"
#include "fairsem/impl/net/hiredis_context-inl.hpp"
#include "fairsem/impl/net/hiredis_reply-inl.hpp"
#include "fairsem/impl/net/router-inl.hpp"
#include "fairsem/impl/net/server_info-inl.hpp"
#include "fairsem/impl/net/tls-inl.hpp"
#include "fairsem/impl/net/url_parser-inl.hpp"
#include "fairsem/impl/protocol/acquire_event-inl.hpp"
#include "fairsem/impl/protocol/acquire_fsm-inl.hpp"
#include "fairsem/impl/protocol/replies-inl.hpp"
#include "fairsem/impl/protocol/retry_backoff-inl.hpp"
#include "fairsem/impl/renewal/watchdog-inl.hpp"
#include "fairsem/impl/runtime/admission-inl.hpp"
#include "fairsem/impl/runtime/call_batcher-inl.hpp"
#include "fairsem/impl/runtime/connection_pool-inl.hpp"
#include "fairsem/impl/runtime/runtime-inl.hpp"
#include "fairsem/impl/semaphore/async_acquire-inl.hpp"
#include "fairsem/impl/semaphore/fair_semaphore-inl.hpp"
#include "fairsem/impl/semaphore/observation-inl.hpp"
#include "fairsem/impl/semaphore/permit-inl.hpp"
#include "fairsem/impl/semaphore/semaphore_admin_libraries-inl.hpp"
#include "fairsem/impl/semaphore/semaphore_admin_listing-inl.hpp"
#include "fairsem/impl/semaphore/semaphore_core-inl.hpp"
#include "fairsem/impl/semaphore/semaphore_core_acquire-inl.hpp"
#include "fairsem/impl/semaphore/semaphore_core_leaves-inl.hpp"
#include "fairsem/impl/semaphore/semaphore_core_renewal-inl.hpp"
#include "fairsem/impl/threads/executor-inl.hpp"
#include "fairsem/impl/threads/fork-inl.hpp"
#include "fairsem/impl/threads/notifier-inl.hpp"
#include "fairsem/impl/threads/thread_reaper-inl.hpp"
#include "fairsem/impl/wake/wake_subscription-inl.hpp"
#include "fairsem/impl/wake/waker-inl.hpp"
#include "fairsem/impl/wake/waker_loop-inl.hpp"
