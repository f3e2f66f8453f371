# Warning flags for fairsem's own targets. They are never pushed onto consumers, and
# -Werror is opt-in (FAIRSEM_WERROR, on in CI).
function(fairsem_enable_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                                             -Wno-sign-conversion)
    if(FAIRSEM_WERROR)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
  elseif(MSVC)
    target_compile_options(${target} PRIVATE /W4)
    if(FAIRSEM_WERROR)
      target_compile_options(${target} PRIVATE /WX)
    endif()
  endif()
endfunction()

# GCC 12+ under -fsanitize=thread warns (-Wtsan) at every std::atomic_thread_fence, which
# ThreadSanitizer does not model; Asio's headers use it. For targets that include Asio only.
function(fairsem_quiet_asio_tsan_warning target)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12)
    target_compile_options(${target} PRIVATE -Wno-tsan)
  endif()
endfunction()
