#pragma once

// Header-only mode's implementation: every public header, complete, then every implementation
// file of the library (each folder's list, fairsem/impl/<folder>/units.hpp, the whole of what
// src/<folder>.cpp compiles in the default mode), with FAIRSEM_INLINE = inline. The first public
// header a translation unit includes includes this file at its end (FAIRSEM_IMPL_PENDING keeps the
// headers it includes from doing it before they are all complete); nothing else should include it.
// The units depend on one another (a Client's runtime renews the permits of every semaphore, a
// semaphore calls through connections, the router and the waker), so every public header brings all
// of them. Besides fairsem, a translation unit needs hiredis's, fmt's and (for TLS) OpenSSL's
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

// The implementation: the lists of each folder's files, as src/<folder>.cpp compiles them.
#include "fairsem/impl/errors-inl.hpp"
#include "fairsem/impl/net/units.hpp"
#include "fairsem/impl/protocol/units.hpp"
#include "fairsem/impl/renewal/units.hpp"
#include "fairsem/impl/runtime/units.hpp"
#include "fairsem/impl/semaphore/units.hpp"
#include "fairsem/impl/threads/units.hpp"
#include "fairsem/impl/wake/units.hpp"
