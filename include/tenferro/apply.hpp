// tenferro::apply: a compile-time expression (<tenferro/expr.hpp>) lifted over eager tensors as ONE
// tape node (ad/apply.hpp). It includes both layers: a translation unit calling apply compiles the
// fused kernels of its own expressions, so it costs what the compile-time layer costs.
#pragma once

#include <tenferro/ad/apply.hpp>
#include <tenferro/eager.hpp>
