// tenferro: header-only automatic differentiation for dense tensors. Everything a user needs.
#pragma once

#include <tenferro/core/dtype.hpp>
#include <tenferro/core/error.hpp>
#include <tenferro/core/shape.hpp>
#include <tenferro/expr.hpp>
#include <tenferro/tensor/io.hpp>
#include <tenferro/tensor/tensor.hpp>
#include <tenferro/tensor/typed_tensor.hpp>
