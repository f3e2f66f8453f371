# fairsem_embed_scripts(OUTPUT <file.hpp> SCRIPTS <a.lua> ...
#                       [COMPOSE <name>=<part.lua>+<part.lua>... ...] [LUA_DIR <dir>]
#                       [COMPOSED_LIST <name>] [LIBRARY <var>=<prefix> [LIBRARY_VERSION <v>]])
#
# Generates a C++ header that defines one inline constexpr fairsem::detail::Script per script:
# its name, its body and the SHA1 that Redis will give it. A SCRIPTS entry is one .lua file,
# named after the file (without extension); a COMPOSE entry is the concatenation of its parts in
# order (shared helpers first, the operation last), named <name> and also written to
# <LUA_DIR>/<name>.lua so that it can be run with `redis-cli --eval`. COMPOSED_LIST <name> also
# defines `inline constexpr std::array<const Script*, N> <name>`: the COMPOSE entries in order,
# so that code walking every composed script names none of them. LIBRARY also makes the COMPOSE
# entries one Redis function library, `inline constexpr Library <var>`, and gives each composed
# Script its function there (see FairsemEmbedScriptsRun.cmake for how the library is built);
# LIBRARY_VERSION, the version each of its functions names in its description ("fairsem <v>"),
# which is how `fairsem functions list` tells which version loaded a library.
#
# The header is written at configure time, not by a build step: in header-only mode
# (fairsem::fairsem_header_only, an INTERFACE target) a consumer's sources include it, and no
# build rule of fairsem runs before them. Every part is a configure dependency, so editing a .lua
# file re-runs CMake, which rewrites the header (only when its content changes, so unrelated
# rebuilds stay incremental).
set(_FAIRSEM_EMBED_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/FairsemEmbedScriptsRun.cmake")

function(fairsem_embed_scripts)
  cmake_parse_arguments(ARG "" "OUTPUT;LUA_DIR;COMPOSED_LIST;LIBRARY;LIBRARY_VERSION" "SCRIPTS;COMPOSE" ${ARGN})
  set(_entries)
  set(_composed)
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
    list(APPEND _composed "${_name}")
  endforeach()
  list(REMOVE_DUPLICATES _depends)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_depends}
                                                                 "${_FAIRSEM_EMBED_SCRIPT}")
  # The worker reads OUTPUT, SCRIPTS, LUA_DIR, COMPOSED_LIST, COMPOSED, LIBRARY and
  # LIBRARY_VERSION.
  set(OUTPUT "${ARG_OUTPUT}")
  set(LIBRARY "${ARG_LIBRARY}")
  set(LIBRARY_VERSION "${ARG_LIBRARY_VERSION}")
  set(COMPOSED_LIST "${ARG_COMPOSED_LIST}")
  string(REPLACE ";" "|" COMPOSED "${_composed}")
  string(REPLACE ";" "|" SCRIPTS "${_entries}")
  set(LUA_DIR "${ARG_LUA_DIR}")
  include("${_FAIRSEM_EMBED_SCRIPT}")
endfunction()
