// Compiles fairsem/impl/protocol/retry_backoff-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/protocol/retry_backoff-inl.hpp"
