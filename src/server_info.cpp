// Compiles fairsem/impl/server_info-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/server_info-inl.hpp"
