// Compiles fairsem/impl/protocol/acquire_fsm-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/protocol/acquire_fsm-inl.hpp"
