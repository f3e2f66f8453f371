// Compiles fairsem/impl/redirection-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/redirection-inl.hpp"
