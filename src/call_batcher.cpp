// Compiles fairsem/impl/runtime/call_batcher-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/runtime/call_batcher-inl.hpp"
