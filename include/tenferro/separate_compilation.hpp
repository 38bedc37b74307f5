// The eager runtime compiled once: the source of the CMake target tenferro::eager. A build without
// CMake may include it from exactly ONE source file of a program whose translation units all
// define TENFERRO_SEPARATE_COMPILATION (see core/detail/config.hpp):
//
//     // tenferro.cpp
//     #include <tenferro/separate_compilation.hpp>
//
// The other translation units then only declare the eager runtime's functions and the eager ops'
// kernels (docs/eager.md, "Compile time").
//
// The same in pieces that compile in parallel (what tenferro::eager does): one source file for
// each TENFERRO_SEPARATE_COMPILATION_PART from 0 to 3, defined before including this header.
// Part 0 is the runtime, parts 1 to 3 the kernels of cpu/kernel_list.inc's three parts.
#pragma once

#ifndef TENFERRO_SEPARATE_COMPILATION
#error "define TENFERRO_SEPARATE_COMPILATION in every translation unit (e.g. as a compile definition)"
#endif

#if !defined(TENFERRO_SEPARATE_COMPILATION_PART) || TENFERRO_SEPARATE_COMPILATION_PART == 0
// The runtime's definitions (core/detail/config.hpp).
#define TENFERRO_BUILDING_IMPLEMENTATION
#endif
#if defined(TENFERRO_SEPARATE_COMPILATION_PART)
// The kernels are defined by the other parts: declared here, as in a program (cpu/fused.hpp).
#define TENFERRO_EXTERN_KERNELS
#endif

#include <tenferro/cpu/fused.hpp>
#include <tenferro/eager.hpp>
#include <tenferro/tenferro.hpp>

#if !defined(TENFERRO_SEPARATE_COMPILATION_PART) || TENFERRO_SEPARATE_COMPILATION_PART == 0
namespace tenferro {
#define TENFERRO_TENSOR_FACTORY(T) template Tensor Tensor::from_vec_col_major<T>(Shape, std::vector<T>);
TENFERRO_FOR_EACH_ELEMENT(TENFERRO_TENSOR_FACTORY)
#undef TENFERRO_TENSOR_FACTORY
}  // namespace tenferro
#endif

#if !defined(TENFERRO_SEPARATE_COMPILATION_PART) || TENFERRO_SEPARATE_COMPILATION_PART != 0
namespace tenferro::cpu {
#if defined(TENFERRO_SEPARATE_COMPILATION_PART)
#define TENFERRO_KERNEL_PART(k) ((k) == TENFERRO_SEPARATE_COMPILATION_PART)
#endif
#define TENFERRO_KERNEL(E) template struct fused_kernels<E>;
#include <tenferro/cpu/kernel_list.inc>
#undef TENFERRO_KERNEL
#undef TENFERRO_KERNEL_PART
}  // namespace tenferro::cpu
#endif
