# fake_hiredis(<prefix> <version> <layout>): a scratch hiredis install for configure-only tests.
# The header declares <version>; the library is an empty file (nothing is linked against it).
#   plain       include/ and lib/ only, like Debian's 0.14 (found through CMAKE_PREFIX_PATH)
#   config      plus lib/cmake/hiredis with a version file accepting only the same major, like
#               hiredis 1.1 and later
#   config-1.0  plus share/hiredis with no version file and an exported include directory of
#               <prefix>/., like hiredis 1.0
#   no-header   lib/ only
# Also writes lib/pkgconfig/hiredis.pc, and for 1.x, as hiredis built with ENABLE_SSL does,
# hiredis_ssl's header, library and .pc (not when FAKE_HIREDIS_NO_SSL is set).
include(CMakePackageConfigHelpers)

function(fake_hiredis prefix version layout)
  file(REMOVE_RECURSE "${prefix}")
  string(REPLACE "." ";" _parts "${version}")
  list(GET _parts 0 _major)
  list(GET _parts 1 _minor)
  list(GET _parts 2 _patch)
  if(NOT layout STREQUAL "no-header")
    file(WRITE "${prefix}/include/hiredis/hiredis.h"
      "/* fake hiredis for fairsem's packaging tests */\n"
      "#define HIREDIS_MAJOR ${_major}\n#define HIREDIS_MINOR ${_minor}\n"
      "#define HIREDIS_PATCH ${_patch}\n#define HIREDIS_SONAME ${_major}.${_minor}.0\n")
  endif()
  file(WRITE "${prefix}/lib/libhiredis.so" "")
  file(WRITE "${prefix}/lib/pkgconfig/hiredis.pc"
    "prefix=${prefix}\nName: hiredis\nDescription: fake\nVersion: ${version}\n"
    "Libs: -L\${prefix}/lib -lhiredis\nCflags: -I\${prefix}/include\n")
  if(_major GREATER_EQUAL 1 AND NOT FAKE_HIREDIS_NO_SSL)
    file(WRITE "${prefix}/include/hiredis/hiredis_ssl.h" "/* fake hiredis_ssl */\n")
    file(WRITE "${prefix}/lib/libhiredis_ssl.so" "")
    file(WRITE "${prefix}/lib/pkgconfig/hiredis_ssl.pc"
      "prefix=${prefix}\nName: hiredis_ssl\nDescription: fake\nVersion: ${version}\n"
      "Requires: hiredis\nLibs: -L\${prefix}/lib -lhiredis_ssl\n")
  endif()

  if(layout STREQUAL "config")
    set(_dir "${prefix}/lib/cmake/hiredis")
    set(_up "../../..")
    set(_include "\${_prefix}/include")
    set(_dirs "set(hiredis_INCLUDE_DIRS \"\${_prefix}/include\")")
    write_basic_package_version_file("${_dir}/hiredis-config-version.cmake"
      VERSION ${version} COMPATIBILITY SameMajorVersion)
  elseif(layout STREQUAL "config-1.0")
    set(_dir "${prefix}/share/hiredis")
    set(_up "../..")
    set(_include "\${_prefix}/.")
    set(_dirs "")
  else()
    return()
  endif()
  file(WRITE "${_dir}/hiredis-config.cmake" "
get_filename_component(_prefix \"\${CMAKE_CURRENT_LIST_DIR}/${_up}\" ABSOLUTE)
if(NOT TARGET hiredis::hiredis)
  add_library(hiredis::hiredis SHARED IMPORTED)
  set_target_properties(hiredis::hiredis PROPERTIES
    IMPORTED_LOCATION \"\${_prefix}/lib/libhiredis.so\"
    INTERFACE_INCLUDE_DIRECTORIES \"${_include}\")
endif()
set(hiredis_LIBRARIES hiredis::hiredis)
${_dirs}
")
endfunction()
