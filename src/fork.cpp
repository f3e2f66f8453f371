// Compiles fairsem/impl/threads/fork-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/threads/fork-inl.hpp"
