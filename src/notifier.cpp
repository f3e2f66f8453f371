// Compiles fairsem/impl/threads/notifier-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/threads/notifier-inl.hpp"
