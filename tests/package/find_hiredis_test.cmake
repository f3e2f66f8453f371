# package.find_hiredis: cmake/Findhiredis.cmake against scratch hiredis installs of each layout
# (fake_hiredis.cmake) and against whatever hiredis this machine has by default. Configure only.
include("${CMAKE_CURRENT_LIST_DIR}/hiredis_probe.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/fake_hiredis.cmake")
file(REMOVE_RECURSE "${WORK}")

# Nothing said: the default hiredis (Debian's 0.14 here), its header beside its library.
probe_hiredis(default)
get_filename_component(prefix "${FOUND_INCLUDE_DIR}" DIRECTORY)
expect_from_prefix(default "${prefix}")
if(NOT FOUND_VERSION MATCHES "^[0-9]+\\.[0-9]+\\.[0-9]+$" OR FOUND_VERSION VERSION_LESS 0.13)
  message(FATAL_ERROR "[default] hiredis_VERSION is '${FOUND_VERSION}'")
endif()

# hiredis 1.1+ through -Dhiredis_DIR (its version file rejects a request for 0.13), and the
# same prefix through CMAKE_PREFIX_PATH.
fake_hiredis("${WORK}/h12" 1.2.0 config)
probe_hiredis(config_dir "-Dhiredis_DIR=${WORK}/h12/lib/cmake/hiredis")
expect_equal(config_dir hiredis_VERSION "${FOUND_VERSION}" 1.2.0)
expect_from_prefix(config_dir "${WORK}/h12")
probe_hiredis(prefix_path "-DCMAKE_PREFIX_PATH=${WORK}/h12")
expect_equal(prefix_path hiredis_VERSION "${FOUND_VERSION}" 1.2.0)
expect_from_prefix(prefix_path "${WORK}/h12")

# hiredis 1.0: config in share/hiredis, no version file (the version is the header's), an
# include directory of <prefix>/. -- in a build directory that had found the default hiredis
# first, so a cached hiredis_INCLUDE_DIR is there to be wrongly reused.
fake_hiredis("${WORK}/h10" 1.0.2 config-1.0)
probe_hiredis(config_1.0)
probe_hiredis(config_1.0 "-Dhiredis_DIR=${WORK}/h10/share/hiredis")
expect_equal(config_1.0 hiredis_VERSION "${FOUND_VERSION}" 1.0.2)
expect_from_prefix(config_1.0 "${WORK}/h10")

# No config: header and library from the prefix given, never a header from elsewhere.
fake_hiredis("${WORK}/h013" 0.13.3 plain)
probe_hiredis(plain "-DCMAKE_PREFIX_PATH=${WORK}/h013")
expect_equal(plain hiredis_VERSION "${FOUND_VERSION}" 0.13.3)
expect_from_prefix(plain "${WORK}/h013")
fake_hiredis("${WORK}/headerless" 0.14.1 no-header)
configure_project("${CMAKE_CURRENT_LIST_DIR}/find_hiredis" "${WORK}/headerless-build"
  "-DFAIRSEM_CMAKE_MODULES=${FAIRSEM_CMAKE_MODULES}" "-DCMAKE_PREFIX_PATH=${WORK}/headerless")
if(PROBE_RC EQUAL 0 OR NOT PROBE_OUTPUT MATCHES "Could NOT find hiredis \\(missing: hiredis_INCLUDE_DIR\\)")
  message(FATAL_ERROR "[headerless] a library without its header must not be found "
                      "(exit ${PROBE_RC}):\n${PROBE_OUTPUT}")
endif()
message(STATUS "Findhiredis found every layout from its own prefix")
