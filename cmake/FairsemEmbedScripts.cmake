# fairsem_embed_scripts(OUTPUT <file.cpp> SCRIPTS <a.lua> ...
#                       [COMPOSE <name>=<part.lua>+<part.lua>... ...] [LUA_DIR <dir>])
#
# Generates a C++ source that defines one fairsem::detail::Script per script: its name, its body
# and the SHA1 that Redis will give it. A SCRIPTS entry is one .lua file, named after the file
# (without extension); a COMPOSE entry is the concatenation of its parts in order (shared
# helpers first, the operation last), named <name> and also written to <LUA_DIR>/<name>.lua so
# that it can be run with `redis-cli --eval`. The source is regenerated whenever a part changes.
set(_FAIRSEM_EMBED_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/FairsemEmbedScriptsRun.cmake")

function(fairsem_embed_scripts)
  cmake_parse_arguments(ARG "" "OUTPUT;LUA_DIR" "SCRIPTS;COMPOSE" ${ARGN})
  set(_entries)
  set(_depends)
  foreach(_s IN LISTS ARG_SCRIPTS)
    get_filename_component(_p "${_s}" ABSOLUTE)
    get_filename_component(_name "${_s}" NAME_WE)
    list(APPEND _entries "${_name}=${_p}")
    list(APPEND _depends "${_p}")
  endforeach()
  foreach(_c IN LISTS ARG_COMPOSE)
    string(REGEX MATCH "^([a-z][a-z0-9_]*)=(.+)$" _ok "${_c}")
    if(NOT _ok)
      message(FATAL_ERROR "fairsem_embed_scripts: COMPOSE entry '${_c}' is not NAME=a.lua+b.lua")
    endif()
    set(_name "${CMAKE_MATCH_1}")
    string(REPLACE "+" ";" _parts "${CMAKE_MATCH_2}")
    set(_abs)
    foreach(_part IN LISTS _parts)
      get_filename_component(_p "${_part}" ABSOLUTE)
      list(APPEND _abs "${_p}")
      list(APPEND _depends "${_p}")
    endforeach()
    string(REPLACE ";" "+" _abs "${_abs}")
    list(APPEND _entries "${_name}=${_abs}")
  endforeach()
  list(REMOVE_DUPLICATES _depends)
  string(REPLACE ";" "|" _joined "${_entries}")
  add_custom_command(
    OUTPUT "${ARG_OUTPUT}"
    COMMAND "${CMAKE_COMMAND}" "-DOUTPUT=${ARG_OUTPUT}" "-DSCRIPTS=${_joined}"
            "-DLUA_DIR=${ARG_LUA_DIR}" -P "${_FAIRSEM_EMBED_SCRIPT}"
    DEPENDS ${_depends} "${_FAIRSEM_EMBED_SCRIPT}"
    COMMENT "Embedding fairsem Lua scripts"
    VERBATIM)
endfunction()
