#pragma once

// The implementation files of fairsem/impl/renewal/ (renewing held permits in the background: the
// Watchdog), listed once: src/renewal.cpp compiles them into libfairsem, and
// fairsem/impl/header_only.hpp includes them in header-only mode. A new implementation file of this
// folder is added here and nowhere else.

#include "fairsem/impl/renewal/watchdog-inl.hpp"
