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
#include "fairsem/impl/acquire-inl.hpp"
#include "fairsem/impl/acquire_event-inl.hpp"
#include "fairsem/impl/acquire_fsm-inl.hpp"
#include "fairsem/impl/acquire_fsm_end-inl.hpp"
#include "fairsem/impl/acquire_retry-inl.hpp"
#include "fairsem/impl/admission-inl.hpp"
#include "fairsem/impl/async_acquire-inl.hpp"
#include "fairsem/impl/call_batcher-inl.hpp"
#include "fairsem/impl/connect-inl.hpp"
#include "fairsem/impl/connection-inl.hpp"
#include "fairsem/impl/connection_options-inl.hpp"
#include "fairsem/impl/connection_pool-inl.hpp"
#include "fairsem/impl/discovery-inl.hpp"
#include "fairsem/impl/errors-inl.hpp"
#include "fairsem/impl/executor-inl.hpp"
#include "fairsem/impl/fork-inl.hpp"
#include "fairsem/impl/function_libraries-inl.hpp"
#include "fairsem/impl/hiredis_context-inl.hpp"
#include "fairsem/impl/hiredis_reply-inl.hpp"
#include "fairsem/impl/leaves-inl.hpp"
#include "fairsem/impl/listing-inl.hpp"
#include "fairsem/impl/notifier-inl.hpp"
#include "fairsem/impl/observation-inl.hpp"
#include "fairsem/impl/permit-inl.hpp"
#include "fairsem/impl/redirection-inl.hpp"
#include "fairsem/impl/renewal-inl.hpp"
#include "fairsem/impl/replies-inl.hpp"
#include "fairsem/impl/router-inl.hpp"
#include "fairsem/impl/runtime-inl.hpp"
#include "fairsem/impl/semaphore-inl.hpp"
#include "fairsem/impl/semaphore_core-inl.hpp"
#include "fairsem/impl/server_info-inl.hpp"
#include "fairsem/impl/thread_reaper-inl.hpp"
#include "fairsem/impl/tls-inl.hpp"
#include "fairsem/impl/url_parser-inl.hpp"
#include "fairsem/impl/wake_subscription-inl.hpp"
#include "fairsem/impl/waker-inl.hpp"
#include "fairsem/impl/waker_loop-inl.hpp"
#include "fairsem/impl/watchdog-inl.hpp"
