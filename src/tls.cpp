// Compiles fairsem/impl/net/tls-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/net/tls-inl.hpp"
