# Builds and runs tests/package/consumer against tenferro, either installed from the build tree
# BUILD_DIR to a scratch prefix (MODE=find_package) or pulled in with add_subdirectory
# (MODE=add_subdirectory, which builds tenferro::eager again inside the consumer's build).
file(REMOVE_RECURSE ${WORK_DIR})
set(common -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=Release)
if(LAUNCHER)
  list(APPEND common -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " text "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${text}")
  endif()
endfunction()

if(MODE STREQUAL "find_package")
  run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
  if(NOT EXISTS ${WORK_DIR}/prefix/include/tenferro/tenferro.hpp)
    message(FATAL_ERROR "install did not place the headers")
  endif()
  file(GLOB library ${WORK_DIR}/prefix/lib*/libtenferro_eager.a)
  if(NOT library)
    message(FATAL_ERROR "install did not place libtenferro_eager.a")
  endif()
  run(${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/consumer-build ${common}
      -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DTENFERRO_CONSUME=find_package)
else()
  # -O1: this build of tenferro::eager checks the CMake logic of a subproject, not speed, and -O1
  # compiles it fastest (about 40 % less than -O3).
  run(${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/consumer-build ${common}
      "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" -DTENFERRO_CONSUME=add_subdirectory -DTENFERRO_SOURCE_DIR=${SOURCE_DIR})
  if(EXISTS ${WORK_DIR}/consumer-build/tenferro/tests)
    message(FATAL_ERROR "tests were configured although tenferro was a subproject")
  endif()
endif()
run(${CMAKE_COMMAND} --build ${WORK_DIR}/consumer-build)
run(${WORK_DIR}/consumer-build/consumer)
run(${WORK_DIR}/consumer-build/consumer_eager)
