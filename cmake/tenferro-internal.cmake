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
  if(TENFERRO_MARCH)
    target_compile_options(tenferro_internal_options INTERFACE -march=${TENFERRO_MARCH})
  endif()
  if(TENFERRO_SANITIZE)
    # -g1: line tables for the sanitizers' stack traces, without the full debug information that
    # takes the compiled eager runtime's one translation unit to over 13 GB of compiler memory.
    target_compile_options(tenferro_internal_options INTERFACE
      -fsanitize=${TENFERRO_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all -g1)
    target_link_options(tenferro_internal_options INTERFACE -fsanitize=${TENFERRO_SANITIZE})
  endif()
endif()

# tenferro_add_program(name source...): an executable with tenferro's internal options.
function(tenferro_add_program name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE tenferro_internal_options)
endfunction()

# The eager runtime compiled once (separate compilation, see include/tenferro/core/detail/config.hpp):
# programs using it link these objects and only declare the runtime's functions and kernels.
file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/tenferro_separate_compilation.cpp
     CONTENT "#include <tenferro/separate_compilation.hpp>\n")
add_library(tenferro_compiled OBJECT ${CMAKE_BINARY_DIR}/tenferro_separate_compilation.cpp)
target_link_libraries(tenferro_compiled PRIVATE tenferro_internal_options)
target_compile_definitions(tenferro_compiled PRIVATE TENFERRO_SEPARATE_COMPILATION)

# tenferro_use_separate_compilation(target): build `target` against tenferro_compiled.
function(tenferro_use_separate_compilation target)
  target_sources(${target} PRIVATE $<TARGET_OBJECTS:tenferro_compiled>)
  target_compile_definitions(${target} PRIVATE TENFERRO_SEPARATE_COMPILATION)
endfunction()
