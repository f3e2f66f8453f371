# Findhiredis
# -----------
# Finds the hiredis C client and always provides the imported target hiredis::hiredis.
#
# Looked for, in this order:
#  1. a hiredis::hiredis target that already exists (a parent project that builds hiredis);
#  2. hiredis's own CMake package config (hiredis >= 1.0): -Dhiredis_DIR=<its directory>,
#     hiredis_ROOT or CMAKE_PREFIX_PATH=<prefix>. 1.1+ install it in <prefix>/lib/cmake/hiredis
#     with a version file that accepts only its own major version; 1.0 in <prefix>/share/hiredis
#     with no version file;
#  3. the header and the library (Debian 12's 0.14.1 installs no config).
# The header always comes from the prefix the library came from: never /usr/include next to a
# library elsewhere. hiredis 1.x's hiredis_ssl config, when installed, is in the same prefix
# (<prefix>/lib/cmake/hiredis_ssl beside hiredis_DIR).
#
# Result variables: hiredis_FOUND, hiredis_VERSION (the config's version file, else the
# header's), hiredis_INCLUDE_DIR, hiredis_LIBRARY.
#
# hiredis_ssl (hiredis >= 1.0 built with ENABLE_SSL): looked for beside the library found, with
# its header beside hiredis.h; never elsewhere, so the two always match. When both are there:
# hiredis_ssl_FOUND, hiredis_ssl_LIBRARY and the imported target hiredis::hiredis_ssl (which
# needs hiredis::hiredis and OpenSSL on the link line; fairsem adds them).

# _hiredis_header_dir(<out_var> <dir>...): the first <dir> holding hiredis/hiredis.h, or NOTFOUND.
function(_hiredis_header_dir out_var)
  foreach(_dir IN LISTS ARGN)
    if(_dir AND EXISTS "${_dir}/hiredis/hiredis.h")
      get_filename_component(_dir "${_dir}" ABSOLUTE)
      set(${out_var} "${_dir}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out_var} "${out_var}-NOTFOUND" PARENT_SCOPE)
endfunction()

if(TARGET hiredis::hiredis)
  set(_hiredis_origin "target")
else()
  # A find_package(hiredis) inside this module inherits the caller's version (0.13) when it
  # gives none, and then no hiredis config is ever accepted: 1.1+'s version file wants major 1
  # and 1.0 has no version file. CMake forwards the version only while hiredis_FIND_MODULE
  # is set (a nested call), so the config is looked for with it unset.
  set(_hiredis_find_module "${hiredis_FIND_MODULE}")
  unset(hiredis_FIND_MODULE)
  find_package(hiredis CONFIG QUIET)
  set(hiredis_FIND_MODULE "${_hiredis_find_module}")
  if(TARGET hiredis::hiredis)
    set(_hiredis_origin "config")
  endif()
endif()

if(_hiredis_origin STREQUAL "config")
  # The header from the config's own prefix: the config's include directory (1.1+), else up
  # from the config's directory (share/hiredis, lib/cmake/hiredis, lib/<arch>/cmake/hiredis).
  # 1.0 exports an include directory of <prefix>/., where <hiredis/hiredis.h> is not.
  set(_hiredis_candidates ${hiredis_INCLUDE_DIRS})
  set(_hiredis_up "${hiredis_DIR}")
  foreach(_hiredis_level RANGE 1 4)
    get_filename_component(_hiredis_up "${_hiredis_up}" DIRECTORY)
    list(APPEND _hiredis_candidates "${_hiredis_up}/include")
  endforeach()
  _hiredis_header_dir(hiredis_INCLUDE_DIR ${_hiredis_candidates})
  get_target_property(_hiredis_type hiredis::hiredis TYPE)
  get_target_property(_hiredis_aliased hiredis::hiredis ALIASED_TARGET)
  if(_hiredis_type STREQUAL "INTERFACE_LIBRARY")
    set(hiredis_LIBRARY hiredis::hiredis)
  else()
    get_target_property(hiredis_LIBRARY hiredis::hiredis LOCATION)
  endif()
  get_target_property(_hiredis_includes hiredis::hiredis INTERFACE_INCLUDE_DIRECTORIES)
  if(hiredis_INCLUDE_DIR AND NOT _hiredis_aliased
     AND NOT hiredis_INCLUDE_DIR IN_LIST _hiredis_includes)
    set_property(TARGET hiredis::hiredis APPEND PROPERTY
      INTERFACE_INCLUDE_DIRECTORIES "${hiredis_INCLUDE_DIR}")
  endif()
elseif(_hiredis_origin STREQUAL "target")
  if(NOT hiredis_INCLUDE_DIR)
    get_target_property(_hiredis_includes hiredis::hiredis INTERFACE_INCLUDE_DIRECTORIES)
    _hiredis_header_dir(hiredis_INCLUDE_DIR ${_hiredis_includes})
  endif()
else()
  find_library(hiredis_LIBRARY NAMES hiredis)
  if(hiredis_LIBRARY)
    # <prefix>/lib, <prefix>/lib64 or <prefix>/lib/<multiarch>.
    get_filename_component(_hiredis_up "${hiredis_LIBRARY}" DIRECTORY)
    get_filename_component(_hiredis_up "${_hiredis_up}" DIRECTORY)
    get_filename_component(_hiredis_up2 "${_hiredis_up}" DIRECTORY)
    find_path(hiredis_INCLUDE_DIR hiredis/hiredis.h
      HINTS "${_hiredis_up}/include" "${_hiredis_up2}/include" NO_DEFAULT_PATH)
  endif()
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
if(_hiredis_origin STREQUAL "target")
  # A parent project's target is enough; its version is checked only when it can be read.
  set(_hiredis_target "hiredis::hiredis (already defined)")
  find_package_handle_standard_args(hiredis
    REQUIRED_VARS _hiredis_target
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

set(hiredis_ssl_FOUND FALSE)
if(TARGET hiredis::hiredis_ssl)
  set(hiredis_ssl_FOUND TRUE)
elseif(hiredis_FOUND AND hiredis_VERSION VERSION_GREATER_EQUAL 1.0 AND IS_ABSOLUTE "${hiredis_LIBRARY}"
       AND EXISTS "${hiredis_INCLUDE_DIR}/hiredis/hiredis_ssl.h")
  get_filename_component(_hiredis_libdir "${hiredis_LIBRARY}" DIRECTORY)
  find_library(hiredis_ssl_LIBRARY NAMES hiredis_ssl HINTS "${_hiredis_libdir}" NO_DEFAULT_PATH)
  if(hiredis_ssl_LIBRARY)
    set(hiredis_ssl_FOUND TRUE)
    add_library(hiredis::hiredis_ssl UNKNOWN IMPORTED)
    set_target_properties(hiredis::hiredis_ssl PROPERTIES
      IMPORTED_LOCATION "${hiredis_ssl_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${hiredis_INCLUDE_DIR}")
  endif()
endif()

mark_as_advanced(hiredis_INCLUDE_DIR hiredis_LIBRARY hiredis_ssl_LIBRARY)
