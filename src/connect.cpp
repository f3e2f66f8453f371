// Compiles fairsem/impl/connect-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/connect-inl.hpp"
