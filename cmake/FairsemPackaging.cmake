# CPack: `cpack -G DEB` in a build directory makes a .deb of everything `cmake --install`
# installs (library, headers, CMake package, fairsem.pc, the `fairsem` tool), under /usr.
# Runtime dependencies come from dpkg-shlibdeps (libhiredis0.14, libfmt9, ... on Debian 12);
# the -dev packages the CMake package and fairsem.pc need are the Debian packages that own
# hiredis's header and fmt's CMake config. A hiredis that no Debian package owns (one in its own
# prefix) is not a dependency: such a .deb works only where that hiredis is.

set(FAIRSEM_DEB_MAINTAINER "fairsem maintainers" CACHE STRING
    "Maintainer field of the .deb that cpack -G DEB makes")

# The Debian package that owns `file`, or "" (no dpkg, or a file no package owns).
function(_fairsem_deb_owner file out_var)
  set(${out_var} "" PARENT_SCOPE)
  find_program(FAIRSEM_DPKG_QUERY dpkg-query)
  mark_as_advanced(FAIRSEM_DPKG_QUERY)
  if(FAIRSEM_DPKG_QUERY AND EXISTS "${file}")
    execute_process(COMMAND "${FAIRSEM_DPKG_QUERY}" -S "${file}"
      OUTPUT_VARIABLE _owner RESULT_VARIABLE _rc ERROR_QUIET)
    if(_rc EQUAL 0 AND _owner MATCHES "^([^:, ]+)")
      set(${out_var} "${CMAKE_MATCH_1}" PARENT_SCOPE)
    endif()
  endif()
endfunction()

_fairsem_deb_owner("${hiredis_INCLUDE_DIR}/hiredis/hiredis.h" _fairsem_hiredis_dev)
_fairsem_deb_owner("${fmt_DIR}/fmt-config.cmake" _fairsem_fmt_dev)
set(_fairsem_deb_depends "")
foreach(_dev IN ITEMS "${_fairsem_hiredis_dev}" "${_fairsem_fmt_dev}")
  if(_dev)
    list(APPEND _fairsem_deb_depends "${_dev}")
  endif()
endforeach()
if(NOT _fairsem_hiredis_dev)
  get_filename_component(_fairsem_hiredis_libdir "${hiredis_LIBRARY}" DIRECTORY)
  # dpkg-shlibdeps must still find the library to skip it.
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "${_fairsem_hiredis_libdir}")
  message(STATUS "fairsem .deb: no Debian package owns hiredis ${hiredis_VERSION} "
                 "(${hiredis_INCLUDE_DIR}); the .deb will not depend on a hiredis package")
endif()
string(REPLACE ";" ", " CPACK_DEBIAN_PACKAGE_DEPENDS "${_fairsem_deb_depends}")

set(CPACK_PACKAGE_NAME fairsem)
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_CONTACT "${FAIRSEM_DEB_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_GENERATOR DEB)
include(CPack)
