# Options for tenferro's own tests, examples and benchmarks (never for the library target).
find_program(TENFERRO_CCACHE ccache)
if(TENFERRO_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${TENFERRO_CCACHE})
endif()

add_library(tenferro_internal_options INTERFACE)
target_link_libraries(tenferro_internal_options INTERFACE tenferro::tenferro)
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_compile_options(tenferro_internal_options INTERFACE -Wall -Wextra -Wpedantic)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # g++ 12 reports a false -Wrestrict inside xtensor's printing code at -O2 and above.
    target_compile_options(tenferro_internal_options INTERFACE -Wno-restrict)
    # g++ 12 reports false uninitialized reads inside its own AVX-512 intrinsics headers (xsimd).
    target_compile_options(tenferro_internal_options INTERFACE -Wno-uninitialized -Wno-maybe-uninitialized)
  endif()
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    # No contraction of a * b + c into a fused multiply-add: clang 14 contracts the tests' scalar
    # formulas (a * 3.0 - 1.0), which three tests compare exactly with kernels that round twice.
    target_compile_options(tenferro_internal_options INTERFACE -ffp-contract=off)
  endif()
  if(TENFERRO_MARCH)
    target_compile_options(tenferro_internal_options INTERFACE -march=${TENFERRO_MARCH})
  endif()
  if(TENFERRO_SANITIZE)
    # -g1: line tables for the sanitizers' stack traces, without the full debug information that
    # takes the compiled eager runtime's one translation unit to over 13 GB of compiler memory.
    target_compile_options(tenferro_internal_options INTERFACE
      -fsanitize=${TENFERRO_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all -g1)
    target_link_options(tenferro_internal_options INTERFACE -fsanitize=${TENFERRO_SANITIZE})
    if(TENFERRO_SANITIZE MATCHES "address" AND TENFERRO_SANITIZE MATCHES "undefined")
      # Under AddressSanitizer, UBSan's null and object-size checks repeat what it reports (an
      # access through null or outside its object); with the alignment and pointer-overflow checks
      # they double the compile time of expression-heavy code (g++ 12, -O1, one test: 236 s with,
      # 123 s without). Those two are given up: misaligned or overflowing pointer arithmetic that
      # stays inside the object goes unreported.
      target_compile_options(tenferro_internal_options INTERFACE
        -fno-sanitize=null,alignment,object-size,pointer-overflow)
    endif()
  endif()
endif()

# tenferro_add_program(name source...): an executable with tenferro's internal options.
function(tenferro_add_program name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE tenferro_internal_options)
endfunction()
