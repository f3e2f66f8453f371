// Compiles fairsem/impl/net/hiredis_context-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/net/hiredis_context-inl.hpp"
