# FAIRSEM_TLS (AUTO, ON, OFF): whether fairsem speaks TLS (rediss://). TLS needs hiredis >= 1.0
# with its hiredis_ssl library (Findhiredis looks for it beside hiredis) and OpenSSL. AUTO (the
# default) builds TLS when both are found; ON stops the configure when they are not; OFF never
# builds it. Sets FAIRSEM_WITH_TLS (ON or OFF) for the library, the tests and the package files.
set(FAIRSEM_TLS AUTO CACHE STRING "Build TLS support (rediss://): AUTO, ON or OFF")
set_property(CACHE FAIRSEM_TLS PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${FAIRSEM_TLS}" _fairsem_tls)
if(NOT _fairsem_tls MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "FAIRSEM_TLS is '${FAIRSEM_TLS}'; it must be AUTO, ON or OFF")
endif()

set(FAIRSEM_WITH_TLS OFF)
if(NOT _fairsem_tls STREQUAL "OFF")
  set(_fairsem_tls_missing "")
  if(NOT hiredis_ssl_FOUND)
    if(hiredis_VERSION VERSION_LESS 1.0)
      set(_fairsem_tls_missing "hiredis ${hiredis_VERSION} has no TLS (hiredis_ssl came with 1.0)")
    else()
      set(_fairsem_tls_missing
          "hiredis_ssl (libhiredis_ssl and hiredis/hiredis_ssl.h) is not installed beside hiredis "
          "${hiredis_VERSION} (${hiredis_LIBRARY}); build hiredis with -DENABLE_SSL=ON")
    endif()
  else()
    find_package(OpenSSL QUIET)
    if(NOT OpenSSL_FOUND)
      set(_fairsem_tls_missing "OpenSSL was not found (apt-get install libssl-dev)")
    endif()
  endif()
  if(_fairsem_tls_missing STREQUAL "")
    set(FAIRSEM_WITH_TLS ON)
  elseif(_fairsem_tls STREQUAL "ON")
    message(FATAL_ERROR "FAIRSEM_TLS is ON, but ${_fairsem_tls_missing}.")
  else()
    message(STATUS "fairsem: TLS is not built: ${_fairsem_tls_missing}")
  endif()
endif()
if(FAIRSEM_WITH_TLS)
  message(STATUS "fairsem: TLS is built (hiredis_ssl ${hiredis_VERSION}, OpenSSL ${OPENSSL_VERSION})")
endif()
