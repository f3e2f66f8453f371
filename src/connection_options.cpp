// Compiles fairsem/impl/net/connection_options-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/net/connection_options-inl.hpp"
