// Compiles fairsem/impl/call_batcher-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/call_batcher-inl.hpp"
