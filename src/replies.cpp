// Compiles fairsem/impl/replies-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/replies-inl.hpp"
