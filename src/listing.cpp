// Compiles fairsem/impl/listing-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/listing-inl.hpp"
