// Compiles fairsem/impl/renewal/watchdog-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/renewal/watchdog-inl.hpp"
