#pragma once

// The implementation files of fairsem/impl/protocol/ (the acquire protocol without I/O: AcquireFsm,
// its events, RetryBackoff, the reply decoders), listed once: src/protocol.cpp compiles them into
// libfairsem, and fairsem/impl/header_only.hpp includes them in header-only mode. A new
// implementation file of this folder is added here and nowhere else.

#include "fairsem/impl/protocol/acquire_event-inl.hpp"
#include "fairsem/impl/protocol/acquire_fsm-inl.hpp"
#include "fairsem/impl/protocol/acquire_fsm_end-inl.hpp"
#include "fairsem/impl/protocol/replies-inl.hpp"
#include "fairsem/impl/protocol/retry_backoff-inl.hpp"
#include "fairsem/impl/protocol/status_reply-inl.hpp"
