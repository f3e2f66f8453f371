#pragma once

// fairsem follows semantic versioning; CMake reads the project version from these lines.
#define FAIRSEM_VERSION_MAJOR 0
#define FAIRSEM_VERSION_MINOR 5
#define FAIRSEM_VERSION_PATCH 0

#define FAIRSEM_VERSION_STRING "0.5.0"

namespace fairsem {

/// The library version as "MAJOR.MINOR.PATCH".
inline constexpr const char* version() noexcept { return FAIRSEM_VERSION_STRING; }

}  // namespace fairsem
