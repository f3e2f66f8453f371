# FAIRSEM_PROMETHEUS (AUTO, ON, OFF): whether to build fairsem::prometheus (the library
# fairsem_prometheus, header fairsem/prometheus.hpp), fairsem's metrics in a prometheus-cpp
# Registry, and `fairsem exporter`. It needs prometheus-cpp (Debian: prometheus-cpp-dev). AUTO
# (the default) builds it when prometheus-cpp is found; ON stops the configure when it is not;
# OFF never builds it. The core library never depends on it. Sets FAIRSEM_WITH_PROMETHEUS.
set(FAIRSEM_PROMETHEUS AUTO CACHE STRING
  "Build fairsem::prometheus and `fairsem exporter` (prometheus-cpp): AUTO, ON or OFF")
set_property(CACHE FAIRSEM_PROMETHEUS PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${FAIRSEM_PROMETHEUS}" _fairsem_prometheus)
if(NOT _fairsem_prometheus MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "FAIRSEM_PROMETHEUS is '${FAIRSEM_PROMETHEUS}'; it must be AUTO, ON or OFF")
endif()

set(FAIRSEM_WITH_PROMETHEUS OFF)
if(NOT _fairsem_prometheus STREQUAL "OFF")
  find_package(prometheus-cpp CONFIG QUIET)
  if(prometheus-cpp_FOUND AND TARGET prometheus-cpp::core AND TARGET prometheus-cpp::pull)
    set(FAIRSEM_WITH_PROMETHEUS ON)
    message(STATUS "fairsem: fairsem::prometheus is built (prometheus-cpp from ${prometheus-cpp_DIR})")
  elseif(_fairsem_prometheus STREQUAL "ON")
    message(FATAL_ERROR
      "FAIRSEM_PROMETHEUS is ON, but prometheus-cpp (core and pull) was not found "
      "(apt-get install prometheus-cpp-dev, or point prometheus-cpp_DIR at its CMake files).")
  else()
    message(STATUS "fairsem: fairsem::prometheus is not built: prometheus-cpp was not found")
  endif()
endif()

if(FAIRSEM_WITH_PROMETHEUS)
  add_library(fairsem_prometheus src/prometheus/prometheus_observer.cpp)
  add_library(fairsem::prometheus ALIAS fairsem_prometheus)
  target_link_libraries(fairsem_prometheus PUBLIC fairsem prometheus-cpp::core)
  set_target_properties(fairsem_prometheus PROPERTIES
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}
    EXPORT_NAME prometheus
    POSITION_INDEPENDENT_CODE ON
    INSTALL_RPATH_USE_LINK_PATH ON)
  fairsem_enable_warnings(fairsem_prometheus)
endif()
