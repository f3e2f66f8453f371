// Compiles fairsem/impl/wake/waker_loop-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/wake/waker_loop-inl.hpp"
