// Compiles fairsem/impl/wake/wake_subscription-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/wake/wake_subscription-inl.hpp"
