// Compiles fairsem/impl/tls-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/tls-inl.hpp"
