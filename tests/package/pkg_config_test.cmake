# Builds and runs the consumer with the flags `pkg-config fairsem` gives for the installed tree.
find_program(PKG_CONFIG pkg-config REQUIRED)
set(ENV{PKG_CONFIG_PATH} "${PREFIX}/${LIBDIR}/pkgconfig")
execute_process(COMMAND "${PKG_CONFIG}" --cflags --libs fairsem
  OUTPUT_VARIABLE flags RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config fairsem failed: ${err}")
endif()
separate_arguments(flags UNIX_COMMAND "${flags}")
separate_arguments(cxx_flags UNIX_COMMAND "${CXX_FLAGS}")
# Plain --libs, as a user would write it: it must be enough for the static library too.
execute_process(COMMAND "${CXX}" -std=c++17 ${cxx_flags} "${SOURCE}" -o "${OUTPUT}" ${flags}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "compiling the pkg-config consumer failed")
endif()
execute_process(COMMAND "${OUTPUT}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the pkg-config consumer exited with ${rc}")
endif()
