#pragma once

// The implementation files of fairsem/impl/runtime/ (what a Client shares among its semaphores: the
// Runtime, the connection pool, the call batcher, admission, the Client), listed once:
// src/runtime.cpp compiles them into libfairsem, and fairsem/impl/header_only.hpp includes them in
// header-only mode. A new implementation file of this folder is added here and nowhere else.

#include "fairsem/impl/runtime/admission-inl.hpp"
#include "fairsem/impl/runtime/call_batcher-inl.hpp"
#include "fairsem/impl/runtime/client-inl.hpp"
#include "fairsem/impl/runtime/connection_pool-inl.hpp"
#include "fairsem/impl/runtime/runtime-inl.hpp"
