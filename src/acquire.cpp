// Compiles fairsem/impl/acquire-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/acquire-inl.hpp"
