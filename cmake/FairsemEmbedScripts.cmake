# fairsem_embed_scripts(OUTPUT <file.cpp> SCRIPTS <a.lua> ...)
#
# Generates a C++ source that defines one fairsem::detail::Script per .lua file: its name
# (the file name without extension), its body and the SHA1 that Redis will give it.
# The source is regenerated whenever a script changes.
set(_FAIRSEM_EMBED_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/FairsemEmbedScriptsRun.cmake")

function(fairsem_embed_scripts)
  cmake_parse_arguments(ARG "" "OUTPUT" "SCRIPTS" ${ARGN})
  set(_abs)
  foreach(_s IN LISTS ARG_SCRIPTS)
    get_filename_component(_p "${_s}" ABSOLUTE)
    list(APPEND _abs "${_p}")
  endforeach()
  string(REPLACE ";" "|" _joined "${_abs}")
  add_custom_command(
    OUTPUT "${ARG_OUTPUT}"
    COMMAND "${CMAKE_COMMAND}" "-DOUTPUT=${ARG_OUTPUT}" "-DSCRIPTS=${_joined}"
            -P "${_FAIRSEM_EMBED_SCRIPT}"
    DEPENDS ${_abs} "${_FAIRSEM_EMBED_SCRIPT}"
    COMMENT "Embedding fairsem Lua scripts"
    VERBATIM)
endfunction()
