// The eager runtime compiled once: include from exactly ONE source file of a program whose
// translation units all define TENFERRO_SEPARATE_COMPILATION (see core/detail/config.hpp), with
// the same flags (e.g. the same -march) as the rest of the program:
//
//     // tenferro.cpp
//     #include <tenferro/separate_compilation.hpp>
//
// The other translation units then only declare the eager runtime's functions and the eager ops'
// kernels, which cuts their compile time several times over.
#pragma once

#ifndef TENFERRO_SEPARATE_COMPILATION
#error "define TENFERRO_SEPARATE_COMPILATION in every translation unit (e.g. as a compile definition)"
#endif
#define TENFERRO_BUILDING_IMPLEMENTATION

#include <tenferro/eager.hpp>
#include <tenferro/tenferro.hpp>

namespace tenferro::cpu {
#define TENFERRO_KERNEL(E) template struct fused_kernels<E>;
#include <tenferro/cpu/kernel_list.inc>
#undef TENFERRO_KERNEL
}  // namespace tenferro::cpu
