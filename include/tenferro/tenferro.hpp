// tenferro: header-only automatic differentiation for dense tensors. This header is the
// compile-time layer and the tensors; the eager runtime is <tenferro/eager.hpp> (the CMake
// target tenferro::eager, compiled once; docs/eager.md, "Compile time").
#pragma once

#include <tenferro/core/dtype.hpp>
#include <tenferro/core/error.hpp>
#include <tenferro/core/shape.hpp>
#include <tenferro/expr.hpp>
#include <tenferro/tensor/io.hpp>
#include <tenferro/tensor/tensor.hpp>
#include <tenferro/tensor/typed_tensor.hpp>
