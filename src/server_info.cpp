// Compiles fairsem/impl/net/server_info-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/net/server_info-inl.hpp"
