// Compiles fairsem/impl/net/url_parser-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/net/url_parser-inl.hpp"
