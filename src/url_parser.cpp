// Compiles fairsem/impl/url_parser-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/url_parser-inl.hpp"
