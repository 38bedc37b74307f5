// The runtime layer: EagerRuntime, EagerTensor and its ops, backward, grad / vjp / jvp, gradcheck
// (apply, which also needs the compile-time layer, is <tenferro/apply.hpp>).
//
// Link the CMake target tenferro::eager, the runtime compiled once: it defines
// TENFERRO_SEPARATE_COMPILATION, under which this header only declares the runtime (a few seconds
// of compilation). Without it the header is header-only: it defines the whole runtime and every
// op's kernels in each translation unit including it (over a minute here; docs/eager.md,
// "Compile time").
#pragma once

#include <tenferro/ad/einsum.hpp>
#include <tenferro/ad/gradcheck.hpp>
#include <tenferro/ad/tensor.hpp>
#include <tenferro/core/detail/config.hpp>
#if TENFERRO_HEADER_ONLY  // else compiled once by <tenferro/separate_compilation.hpp>
#include <tenferro/ad/ops.hpp>
#include <tenferro/ad/transforms.hpp>
#include <tenferro/ad/einsum_impl.hpp>
#include <tenferro/ad/extension_impl.hpp>
#endif
