// Compiles fairsem/impl/function_libraries-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/function_libraries-inl.hpp"
