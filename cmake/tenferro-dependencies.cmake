# The packages tenferro links: find_package in the build tree, find_dependency from an installed
# tenferroConfig.cmake. One list for both.
include(CMakeFindDependencyMacro)
macro(_tenferro_require package)
  if(CMAKE_FIND_PACKAGE_NAME STREQUAL "tenferro")
    find_dependency(${package} ${ARGN})
  else()
    find_package(${package} ${ARGN} REQUIRED)
  endif()
endmacro()

# xsimd's package config uses the xtl target without finding it: xtl first.
_tenferro_require(xtl)
_tenferro_require(xsimd)
_tenferro_require(xtensor)
_tenferro_require(TBB)
_tenferro_require(Boost 1.74)
# The BLAS of the eager runtime's contractions (called through CBLAS): OpenBLAS unless BLA_VENDOR
# names another.
if(NOT DEFINED BLA_VENDOR)
  set(BLA_VENDOR OpenBLAS)
  _tenferro_require(BLAS)
  unset(BLA_VENDOR)
else()
  _tenferro_require(BLAS)
endif()
