// Compiles fairsem/impl/waker-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/waker-inl.hpp"
