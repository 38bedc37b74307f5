// The runtime layer: EagerRuntime, EagerTensor and its ops, backward, grad / vjp / jvp, apply.
//
// Header-only by default. A translation unit including it compiles every eager op's kernels
// (about a minute here); define TENFERRO_SEPARATE_COMPILATION everywhere and include
// <tenferro/separate_compilation.hpp> from one source file to compile them once
// (docs/eager.md, "Compile time").
#pragma once

#include <tenferro/ad/apply.hpp>
#include <tenferro/ad/transforms.hpp>
