# Installs the library, headers, CMake package files and fairsem.pc.
include(CMakePackageConfigHelpers)

set(FAIRSEM_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/fairsem" CACHE STRING
    "Where fairsemConfig.cmake is installed, relative to the prefix")
set(FAIRSEM_PKGCONFIG_DIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig" CACHE STRING
    "Where fairsem.pc is installed, relative to the prefix")

# Both targets, in one export: fairsem::fairsem (the compiled library) and
# fairsem::fairsem_header_only (an INTERFACE target over the same headers).
install(TARGETS fairsem fairsem_header_only
  EXPORT fairsemTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The public headers (include/fairsem/*.hpp) and, under fairsem/impl/ and its folders, the
# library's internal headers and implementation (*-inl.hpp, each folder's list in units.hpp),
# with the generated scripts_data.hpp beside them: the compiled library's users include none of
# them, header-only mode includes them all.
install(DIRECTORY include/fairsem DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.hpp")
install(FILES "${FAIRSEM_GENERATED_INCLUDE_DIR}/fairsem/impl/scripts_data.hpp"
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/fairsem/impl)

install(EXPORT fairsemTargets
  NAMESPACE fairsem::
  DESTINATION ${FAIRSEM_CMAKE_DIR})
# fairsem::prometheus, where it is built: an export of its own, which fairsemConfig.cmake loads
# (and looks for prometheus-cpp) only for find_package(fairsem COMPONENTS prometheus).
if(FAIRSEM_WITH_PROMETHEUS)
  install(TARGETS fairsem_prometheus
    EXPORT fairsemPrometheusTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT fairsemPrometheusTargets
    NAMESPACE fairsem::
    DESTINATION ${FAIRSEM_CMAKE_DIR})
endif()
configure_package_config_file(cmake/fairsemConfig.cmake.in
  "${CMAKE_CURRENT_BINARY_DIR}/fairsemConfig.cmake"
  INSTALL_DESTINATION ${FAIRSEM_CMAKE_DIR})
write_basic_package_version_file("${CMAKE_CURRENT_BINARY_DIR}/fairsemConfigVersion.cmake"
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  "${CMAKE_CURRENT_BINARY_DIR}/fairsemConfig.cmake"
  "${CMAKE_CURRENT_BINARY_DIR}/fairsemConfigVersion.cmake"
  cmake/Findhiredis.cmake
  DESTINATION ${FAIRSEM_CMAKE_DIR})

# pkg-config: the prefix is found relative to the .pc file, so the tree stays relocatable.
file(RELATIVE_PATH _fairsem_pc_to_prefix "/prefix/${FAIRSEM_PKGCONFIG_DIR}" "/prefix")
string(REGEX REPLACE "/$" "" _fairsem_pc_to_prefix "${_fairsem_pc_to_prefix}")
# hiredis as built against: the same major, and for 0.x the same minor (fairsemConfig.cmake
# checks the same).
if(hiredis_VERSION MATCHES "^0\\.([0-9]+)")
  math(EXPR _fairsem_next "${CMAKE_MATCH_1} + 1")
  set(_fairsem_pc_hiredis "hiredis >= 0.${CMAKE_MATCH_1}, hiredis < 0.${_fairsem_next}")
elseif(hiredis_VERSION MATCHES "^([0-9]+)\\.")
  math(EXPR _fairsem_next "${CMAKE_MATCH_1} + 1")
  set(_fairsem_pc_hiredis "hiredis >= ${CMAKE_MATCH_1}.0, hiredis < ${_fairsem_next}")
else()
  set(_fairsem_pc_hiredis "hiredis")
endif()
if(FAIRSEM_WITH_TLS)
  string(REPLACE "hiredis" "hiredis_ssl" _fairsem_pc_hiredis_ssl "${_fairsem_pc_hiredis}")
  set(_fairsem_pc_hiredis "${_fairsem_pc_hiredis_ssl}, ${_fairsem_pc_hiredis}, openssl")
endif()
# The public headers need neither fmt nor hiredis (no Cflags of theirs); a static libfairsem
# needs both on every link line, not only with --static, a shared one only its own.
get_target_property(_fairsem_type fairsem TYPE)
if(_fairsem_type STREQUAL "STATIC_LIBRARY")
  set(FAIRSEM_PC_REQUIRES "fmt, ${_fairsem_pc_hiredis}")
  set(FAIRSEM_PC_REQUIRES_PRIVATE "")
else()
  set(FAIRSEM_PC_REQUIRES "")
  set(FAIRSEM_PC_REQUIRES_PRIVATE "fmt, ${_fairsem_pc_hiredis}")
endif()
configure_file(cmake/fairsem.pc.in "${CMAKE_CURRENT_BINARY_DIR}/fairsem.pc" @ONLY)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/fairsem.pc" DESTINATION ${FAIRSEM_PKGCONFIG_DIR})
