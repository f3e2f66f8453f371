// Compiles fairsem/impl/notifier-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/notifier-inl.hpp"
