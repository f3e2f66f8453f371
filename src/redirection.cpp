// Compiles fairsem/impl/net/connection_redirect-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/net/connection_redirect-inl.hpp"
