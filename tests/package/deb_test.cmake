# package.deb: `cpack -G DEB` in this build (BUILD_DIR), the package unpacked with dpkg -x into a
# scratch root (nothing is installed), its files and Depends checked, and the find_package
# consumer built against the unpacked /usr and run. Paths in the package: LIBDIR, CMAKE_DIR,
# PKGCONFIG_DIR, BINDIR (relative to /usr). HIREDIS_LIBRARY, HIREDIS_INCLUDE_DIR, FMT_LIBRARY,
# FMT_DIR: what this build used; HIREDIS_DIR: hiredis's own config, if this build used it;
# HIREDIS_PC_DIR: where its hiredis.pc is.
include("${CMAKE_CURRENT_LIST_DIR}/hiredis_probe.cmake")
file(REMOVE_RECURSE "${WORK}")

# run(<what> <command>...): runs it, fails the test if it fails; its stdout in RUN_OUTPUT.
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(RUN_OUTPUT "${out}" PARENT_SCOPE)
endfunction()

run("cpack" "${CMAKE_CPACK_COMMAND}" -G DEB --config "${BUILD_DIR}/CPackConfig.cmake"
    -B "${WORK}/cpack")
file(GLOB debs "${WORK}/cpack/*.deb")
list(LENGTH debs count)
if(NOT count EQUAL 1)
  message(FATAL_ERROR "cpack made ${count} .deb files: ${debs}")
endif()

# Depends: the Debian packages of the hiredis and fmt libraries used (runtime), and of their
# headers (-dev). A hiredis no Debian package owns must not be depended on.
run("dpkg-deb -f" dpkg-deb -f "${debs}" Depends)
set(depends "${RUN_OUTPUT}")
message(STATUS "Depends: ${depends}")
function(owner file out_var)
  set(${out_var} "" PARENT_SCOPE)
  execute_process(COMMAND dpkg-query -S "${file}" OUTPUT_VARIABLE out RESULT_VARIABLE rc ERROR_QUIET)
  if(rc EQUAL 0 AND out MATCHES "^([^:, ]+)")
    set(${out_var} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  endif()
endfunction()
get_filename_component(hiredis_real "${HIREDIS_LIBRARY}" REALPATH)
get_filename_component(fmt_real "${FMT_LIBRARY}" REALPATH)
owner("${hiredis_real}" hiredis_runtime)
owner("${HIREDIS_INCLUDE_DIR}/hiredis/hiredis.h" hiredis_dev)
owner("${fmt_real}" fmt_runtime)
owner("${FMT_DIR}/fmt-config.cmake" fmt_dev)
if(NOT fmt_runtime OR NOT fmt_dev)
  message(FATAL_ERROR "fmt (${fmt_real}, ${FMT_DIR}) is not from a Debian package")
endif()
set(wanted ${fmt_runtime} ${fmt_dev})
if(hiredis_runtime)
  list(APPEND wanted ${hiredis_runtime} ${hiredis_dev})
elseif(depends MATCHES "hiredis")
  message(FATAL_ERROR "the .deb depends on a hiredis package, but this build's hiredis "
                      "(${hiredis_real}) is from none")
endif()
foreach(package IN LISTS wanted)
  if(NOT depends MATCHES "(^|, )${package}( \\(|,|\n|$)")
    message(FATAL_ERROR "Depends lacks ${package}: ${depends}")
  endif()
endforeach()

set(root "${WORK}/root")
run("dpkg -x" dpkg -x "${debs}" "${root}")
set(usr "${root}/usr")
file(GLOB libraries "${usr}/${LIBDIR}/libfairsem.*")
foreach(file "${usr}/include/fairsem/fairsem.hpp" "${usr}/${CMAKE_DIR}/fairsemConfig.cmake"
             "${usr}/${CMAKE_DIR}/Findhiredis.cmake" "${usr}/${PKGCONFIG_DIR}/fairsem.pc"
             "${usr}/${BINDIR}/fairsem" ${libraries})
  if(NOT EXISTS "${file}")
    message(FATAL_ERROR "the .deb has no ${file}")
  endif()
endforeach()
if(NOT libraries)
  message(FATAL_ERROR "the .deb has no ${usr}/${LIBDIR}/libfairsem.*")
endif()
run("the packaged fairsem --version" "${CMAKE_COMMAND}" -E env --unset=LD_LIBRARY_PATH
    "${usr}/${BINDIR}/fairsem" --version)

# pkg-config from the unpacked tree: its prefix follows the .pc file.
set(ENV{PKG_CONFIG_PATH} "${usr}/${PKGCONFIG_DIR}:${HIREDIS_PC_DIR}")
run("pkg-config" pkg-config --cflags-only-I fairsem)
separate_arguments(includes UNIX_COMMAND "${RUN_OUTPUT}")
list(GET includes 0 include)  # fairsem's own; hiredis's may follow
string(REGEX REPLACE "^-I" "" include "${include}")
get_filename_component(include "${include}" REALPATH)
get_filename_component(wanted_include "${usr}/include" REALPATH)
if(NOT include STREQUAL wanted_include)
  message(FATAL_ERROR "pkg-config --cflags fairsem from the unpacked tree: ${RUN_OUTPUT}")
endif()

# The find_package consumer against the unpacked tree only.
set(consumer "${WORK}/consumer")
set(hiredis_option "")
if(HIREDIS_DIR)
  set(hiredis_option "-Dhiredis_DIR=${HIREDIS_DIR}")
endif()
configure_project("${CMAKE_CURRENT_LIST_DIR}/find_package" "${consumer}"
  "-DCMAKE_PREFIX_PATH=${usr}" ${hiredis_option})
if(NOT PROBE_RC EQUAL 0)
  message(FATAL_ERROR "configuring the consumer against the .deb failed:\n${PROBE_OUTPUT}")
endif()
file(STRINGS "${consumer}/CMakeCache.txt" fairsem_dir REGEX "^fairsem_DIR:")
if(NOT fairsem_dir STREQUAL "fairsem_DIR:PATH=${usr}/${CMAKE_DIR}")
  message(FATAL_ERROR "the consumer found another fairsem: ${fairsem_dir}")
endif()
run("building the consumer" "${CMAKE_COMMAND}" --build "${consumer}")
run("the consumer" "${consumer}/consumer")
message(STATUS "${RUN_OUTPUT}")
