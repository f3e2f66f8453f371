// Compiles fairsem/impl/protocol/acquire_event-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/protocol/acquire_event-inl.hpp"
