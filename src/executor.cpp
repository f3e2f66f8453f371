// Compiles fairsem/impl/threads/executor-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/threads/executor-inl.hpp"
