# Helpers for the cmake -P drivers that configure a scratch project against some hiredis.
# The drivers get GENERATOR, CXX, CXX_FLAGS, EXE_LINKER_FLAGS and BUILD_TYPE (this build's,
# so sanitizer builds configure and link) and WORK, a scratch directory.

# configure_project(<source dir> <build dir> <args>...): sets PROBE_RC and PROBE_OUTPUT (stdout
# and stderr) in the caller.
function(configure_project source build)
  execute_process(
    COMMAND "${CMAKE_COMMAND}" -S "${source}" -B "${build}" -G "${GENERATOR}"
            "-DCMAKE_CXX_COMPILER=${CXX}" "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}"
            "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${EXE_LINKER_FLAGS}"
            ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  set(PROBE_RC "${rc}" PARENT_SCOPE)
  set(PROBE_OUTPUT "${out}" PARENT_SCOPE)
endfunction()

# probe_hiredis(<name> <args>...): configures tests/package/find_hiredis in WORK/<name> and
# loads what Findhiredis found (FOUND_VERSION, FOUND_INCLUDE_DIR, FOUND_LIBRARY,
# FOUND_TARGET_INCLUDES) into the caller; fails the test if the configure fails.
macro(probe_hiredis name)
  file(REMOVE "${WORK}/${name}/found.cmake")
  configure_project("${CMAKE_CURRENT_LIST_DIR}/find_hiredis" "${WORK}/${name}"
    "-DFAIRSEM_CMAKE_MODULES=${FAIRSEM_CMAKE_MODULES}" ${ARGN})
  if(NOT PROBE_RC EQUAL 0)
    message(FATAL_ERROR "[${name}] configuring against hiredis failed:\n${PROBE_OUTPUT}")
  endif()
  include("${WORK}/${name}/found.cmake")
endmacro()

# expect_equal(<name> <what> <actual> <expected>)
function(expect_equal name what actual expected)
  if(NOT actual STREQUAL expected)
    message(FATAL_ERROR "[${name}] ${what} is '${actual}', expected '${expected}'")
  endif()
endfunction()

# expect_from_prefix(<name> <prefix>): the header, the library and every include directory of
# hiredis::hiredis come from <prefix>.
function(expect_from_prefix name prefix)
  get_filename_component(prefix "${prefix}" REALPATH)
  get_filename_component(include "${FOUND_INCLUDE_DIR}" REALPATH)
  expect_equal(${name} "hiredis_INCLUDE_DIR" "${include}" "${prefix}/include")
  foreach(path IN LISTS FOUND_LIBRARY FOUND_TARGET_INCLUDES)
    get_filename_component(real "${path}" REALPATH)
    string(FIND "${real}/" "${prefix}/" at)
    if(NOT at EQUAL 0)
      message(FATAL_ERROR "[${name}] ${path} is not in ${prefix} (target includes: "
                          "${FOUND_TARGET_INCLUDES}, library: ${FOUND_LIBRARY})")
    endif()
  endforeach()
endfunction()
