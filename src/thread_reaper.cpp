// Compiles fairsem/impl/thread_reaper-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/thread_reaper-inl.hpp"
