// Defines the fused kernels of the eager ops (cpu/kernel_list.inc): include from exactly one
// source file of a program built with TENFERRO_EXTERN_KERNELS (see cpu/fused.hpp).
#pragma once

#define TENFERRO_INSTANTIATE_KERNELS
#include <tenferro/cpu/fused.hpp>
#include <tenferro/cpu/reduce.hpp>

namespace tenferro::cpu {
#define TENFERRO_KERNEL(E) template struct fused_kernels<E>;
#include <tenferro/cpu/kernel_list.inc>
#undef TENFERRO_KERNEL
}  // namespace tenferro::cpu
