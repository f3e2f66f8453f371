// Compiles fairsem/impl/protocol/replies-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/protocol/replies-inl.hpp"
