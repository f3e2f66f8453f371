# Builds and runs the consumer with the flags `pkg-config fairsem` gives for the installed tree.
# HIREDIS_PC_DIR, if it exists, holds the hiredis.pc of the hiredis this build used.
find_program(PKG_CONFIG pkg-config REQUIRED)
set(ENV{PKG_CONFIG_PATH} "${PREFIX}/${LIBDIR}/pkgconfig")
if(HIREDIS_PC_DIR AND EXISTS "${HIREDIS_PC_DIR}/hiredis.pc")
  set(ENV{PKG_CONFIG_PATH} "$ENV{PKG_CONFIG_PATH}:${HIREDIS_PC_DIR}")
endif()
execute_process(COMMAND "${PKG_CONFIG}" --cflags --libs fairsem
  OUTPUT_VARIABLE flags RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config fairsem failed: ${err}")
endif()
separate_arguments(flags UNIX_COMMAND "${flags}")
separate_arguments(cxx_flags UNIX_COMMAND "${CXX_FLAGS}")
separate_arguments(link_flags UNIX_COMMAND "${EXE_LINKER_FLAGS}")
# pkg-config gives no run path: as a user would, add one for each library directory it names
# (a shared libfairsem, a hiredis outside the loader's default directories).
set(rpaths "")
foreach(flag IN LISTS flags)
  if(flag MATCHES "^-L(.+)")
    list(APPEND rpaths "-Wl,-rpath,${CMAKE_MATCH_1}")
  endif()
endforeach()
# Plain --libs, as a user would write it: it must be enough for the static library too.
execute_process(COMMAND "${CXX}" -std=c++17 ${cxx_flags} "${SOURCE}" -o "${OUTPUT}" ${link_flags}
                        ${flags} ${rpaths}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "compiling the pkg-config consumer failed")
endif()
execute_process(COMMAND "${OUTPUT}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the pkg-config consumer exited with ${rc}")
endif()
