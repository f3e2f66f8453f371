# package.hiredis_mismatch: a consumer of the installed fairsem (PREFIX, its fairsemConfig.cmake
# in FAIRSEM_CONFIG_DIR, built against hiredis BUILT_VERSION) that finds another hiredis must fail to configure with an error naming both
# versions; one that finds a compatible hiredis (same major, and for 0.x same minor) must not.
# pkg-config must refuse the same mismatch. The other hiredis installs are scratch ones
# (fake_hiredis.cmake): nothing is built.
include("${CMAKE_CURRENT_LIST_DIR}/hiredis_probe.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/fake_hiredis.cmake")
file(REMOVE_RECURSE "${WORK}")

if(NOT BUILT_VERSION MATCHES "^([0-9]+)\\.([0-9]+)\\.")
  message(FATAL_ERROR "BUILT_VERSION '${BUILT_VERSION}' is not a hiredis version")
endif()
set(major "${CMAKE_MATCH_1}")
set(minor "${CMAKE_MATCH_2}")
math(EXPR next_major "${major} + 1")
math(EXPR next_minor "${minor} + 1")
# <version> <layout> <compatible?>: hiredis 1.x comes with its config, 0.x without.
if(major EQUAL 0)
  set(cases "1.2.0 config NO" "0.${next_minor}.0 plain NO" "0.${minor}.99 plain YES")
else()
  set(cases "0.14.1 plain NO" "${next_major}.0.0 config NO" "${major}.99.0 config YES")
endif()

foreach(case IN LISTS cases)
  separate_arguments(case UNIX_COMMAND "${case}")
  list(GET case 0 version)
  list(GET case 1 layout)
  list(GET case 2 compatible)
  set(hiredis "${WORK}/hiredis-${version}")
  fake_hiredis("${hiredis}" ${version} ${layout})
  if(layout STREQUAL "config")
    set(where "-Dhiredis_DIR=${hiredis}/lib/cmake/hiredis")
  else()
    set(where "-DCMAKE_PREFIX_PATH=${hiredis}")
  endif()
  configure_project("${CMAKE_CURRENT_LIST_DIR}/find_package" "${WORK}/consumer-${version}"
    "-Dfairsem_DIR=${FAIRSEM_CONFIG_DIR}" "${where}")
  string(REGEX REPLACE "[ \t\r\n]+" " " output "${PROBE_OUTPUT}")
  string(REGEX REPLACE "([][+.*()^$?|\\])" "\\\\\\1" at "${hiredis}/lib/libhiredis.so")
  set(expected "fairsem [0-9.]+ was built against hiredis ${BUILT_VERSION} \\([^)]+\\), but this project found hiredis ${version} at ${at};")
  if(compatible)
    if(NOT PROBE_RC EQUAL 0)
      message(FATAL_ERROR "[${version}] a compatible hiredis was refused:\n${PROBE_OUTPUT}")
    endif()
  elseif(PROBE_RC EQUAL 0 OR NOT output MATCHES "${expected}")
    message(FATAL_ERROR "[${version}] expected the configure to fail with \"${expected}\"; "
                        "it exited with ${PROBE_RC}:\n${PROBE_OUTPUT}")
  endif()

  set(ENV{PKG_CONFIG_PATH} "${PREFIX}/${LIBDIR}/pkgconfig:${hiredis}/lib/pkgconfig")
  execute_process(COMMAND pkg-config --cflags --libs fairsem
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(compatible AND NOT rc EQUAL 0)
    message(FATAL_ERROR "[${version}] pkg-config refused a compatible hiredis:\n${out}")
  elseif(NOT compatible AND (rc EQUAL 0 OR NOT out MATCHES "hiredis.*${version}"))
    message(FATAL_ERROR "[${version}] pkg-config accepted hiredis ${version} (exit ${rc}):\n${out}")
  endif()
  message(STATUS "hiredis ${version}: compatible ${compatible}, as expected")
endforeach()

# Built with TLS: a compatible hiredis without hiredis_ssl beside it is refused, naming both.
if(TLS AND NOT major EQUAL 0)
  set(hiredis "${WORK}/hiredis-${major}.98.0-nossl")
  set(FAKE_HIREDIS_NO_SSL ON)
  fake_hiredis("${hiredis}" ${major}.98.0 config)
  configure_project("${CMAKE_CURRENT_LIST_DIR}/find_package" "${WORK}/consumer-nossl"
    "-Dfairsem_DIR=${FAIRSEM_CONFIG_DIR}" "-Dhiredis_DIR=${hiredis}/lib/cmake/hiredis")
  string(REGEX REPLACE "[ \t\r\n]+" " " output "${PROBE_OUTPUT}")
  if(PROBE_RC EQUAL 0 OR NOT output MATCHES "was built with TLS, against hiredis_ssl .* has no hiredis_ssl beside it")
    message(FATAL_ERROR "a hiredis without hiredis_ssl was not refused (exit ${PROBE_RC}):\n${PROBE_OUTPUT}")
  endif()
  message(STATUS "hiredis ${major}.98.0 without hiredis_ssl: refused, as expected")
endif()
