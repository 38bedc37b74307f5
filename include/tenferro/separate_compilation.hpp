// The eager runtime compiled once: the one source file of the CMake target tenferro::eager. A
// build without CMake may include it from exactly ONE source file of a program whose translation
// units all define TENFERRO_SEPARATE_COMPILATION (see core/detail/config.hpp):
//
//     // tenferro.cpp
//     #include <tenferro/separate_compilation.hpp>
//
// The other translation units then only declare the eager runtime's functions and the eager ops'
// kernels (docs/eager.md, "Compile time").
#pragma once

#ifndef TENFERRO_SEPARATE_COMPILATION
#error "define TENFERRO_SEPARATE_COMPILATION in every translation unit (e.g. as a compile definition)"
#endif
#define TENFERRO_BUILDING_IMPLEMENTATION

#include <tenferro/eager.hpp>
#include <tenferro/tenferro.hpp>

namespace tenferro {
#define TENFERRO_TENSOR_FACTORY(T) template Tensor Tensor::from_vec_col_major<T>(Shape, std::vector<T>);
TENFERRO_FOR_EACH_ELEMENT(TENFERRO_TENSOR_FACTORY)
#undef TENFERRO_TENSOR_FACTORY
}  // namespace tenferro

namespace tenferro::cpu {
#define TENFERRO_KERNEL(E) template struct fused_kernels<E>;
#include <tenferro/cpu/kernel_list.inc>
#undef TENFERRO_KERNEL
}  // namespace tenferro::cpu
