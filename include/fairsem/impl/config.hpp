#pragma once

// How fairsem's implementation is compiled; included by every fairsem/impl/*/*-inl.hpp.
//
// The implementation lives in fairsem/impl/<folder>/*-inl.hpp, listed once per folder in
// fairsem/impl/<folder>/units.hpp, and is compiled one of two ways:
//   - the compiled library (the default, CMake target fairsem::fairsem): src/<folder>.cpp
//     includes fairsem/impl/<folder>/units.hpp, so each file is compiled exactly once, into
//     libfairsem, and FAIRSEM_INLINE is empty. No public header includes anything under
//     fairsem/impl/.
//   - header-only (FAIRSEM_HEADER_ONLY defined for every translation unit of the consumer, as
//     the CMake target fairsem::fairsem_header_only does): the public headers include the whole
//     implementation (fairsem/impl/header_only.hpp) and FAIRSEM_INLINE is `inline`, so any number
//     of translation units may include them. The consumer links hiredis, fmt and the threads
//     library itself; nothing of fairsem.
//
// FAIRSEM_INLINE marks every function and namespace-scope variable an -inl file defines. It may
// be predefined (scripts/tidy.sh reads the -inl files as header-only mode compiles them).
#ifndef FAIRSEM_INLINE
#ifdef FAIRSEM_HEADER_ONLY
#define FAIRSEM_INLINE inline
#else
#define FAIRSEM_INLINE
#endif
#endif

// TLS (rediss://) needs hiredis_ssl and OpenSSL. The compiled library always defines
// FAIRSEM_WITH_TLS (cmake/FairsemTls.cmake); in header-only mode TLS is off unless the consumer
// defines FAIRSEM_WITH_TLS=1 and links hiredis_ssl and OpenSSL itself.
#ifndef FAIRSEM_WITH_TLS
#define FAIRSEM_WITH_TLS 0
#endif
