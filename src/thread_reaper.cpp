// Compiles fairsem/impl/threads/thread_reaper-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/threads/thread_reaper-inl.hpp"
