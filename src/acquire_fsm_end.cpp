// Compiles fairsem/impl/acquire_fsm_end-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/acquire_fsm_end-inl.hpp"
