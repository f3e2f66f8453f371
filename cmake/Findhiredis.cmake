# Findhiredis
# -----------
# Finds the hiredis C client and always provides the imported target hiredis::hiredis.
#
# hiredis >= 1.0 installs a CMake package config that exports hiredis::hiredis; it is used
# when present. Older releases (Debian 12 ships 0.14.1) install no usable target, so the
# header and library are located directly and the target is created here.
#
# Result variables: hiredis_FOUND, hiredis_VERSION, hiredis_INCLUDE_DIR, hiredis_LIBRARY.

if(NOT TARGET hiredis::hiredis)
  find_package(hiredis CONFIG QUIET)
endif()

if(TARGET hiredis::hiredis)
  # hiredis 1.0/1.1 export an include directory of "." (the prefix itself), so
  # <hiredis/hiredis.h> resolves only where <prefix>/include is a default path. Find the
  # header and add its directory to the target.
  find_path(hiredis_INCLUDE_DIR hiredis/hiredis.h HINTS "${hiredis_DIR}/../../../include")
  if(hiredis_INCLUDE_DIR)
    get_target_property(_hiredis_aliased hiredis::hiredis ALIASED_TARGET)
    if(NOT _hiredis_aliased)
      set_property(TARGET hiredis::hiredis APPEND PROPERTY
        INTERFACE_INCLUDE_DIRECTORIES "${hiredis_INCLUDE_DIR}")
    endif()
  endif()
else()
  find_path(hiredis_INCLUDE_DIR hiredis/hiredis.h)
  find_library(hiredis_LIBRARY NAMES hiredis)
endif()

if(NOT hiredis_VERSION AND hiredis_INCLUDE_DIR AND EXISTS "${hiredis_INCLUDE_DIR}/hiredis/hiredis.h")
  file(STRINGS "${hiredis_INCLUDE_DIR}/hiredis/hiredis.h" _hiredis_defs
       REGEX "^#define HIREDIS_(MAJOR|MINOR|PATCH) [0-9]+")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*#define HIREDIS_${_part} ([0-9]+).*" "\\1" _hiredis_${_part} "${_hiredis_defs}")
  endforeach()
  set(hiredis_VERSION "${_hiredis_MAJOR}.${_hiredis_MINOR}.${_hiredis_PATCH}")
endif()

include(FindPackageHandleStandardArgs)
if(TARGET hiredis::hiredis)
  # A target from hiredis's own config (or from a parent project that builds hiredis) is
  # enough; its version is checked only when it can be read.
  set(_hiredis_target_found TRUE)
  find_package_handle_standard_args(hiredis
    REQUIRED_VARS _hiredis_target_found
    VERSION_VAR hiredis_VERSION)
else()
  find_package_handle_standard_args(hiredis
    REQUIRED_VARS hiredis_LIBRARY hiredis_INCLUDE_DIR
    VERSION_VAR hiredis_VERSION)
  if(hiredis_FOUND AND NOT TARGET hiredis::hiredis)
    add_library(hiredis::hiredis UNKNOWN IMPORTED)
    set_target_properties(hiredis::hiredis PROPERTIES
      IMPORTED_LOCATION "${hiredis_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${hiredis_INCLUDE_DIR}")
  endif()
endif()

mark_as_advanced(hiredis_INCLUDE_DIR hiredis_LIBRARY)
