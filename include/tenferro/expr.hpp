// The compile-time layer: typed expression trees, their derivatives as types, and one fused SIMD
// loop for the value and every gradient. See docs/compile-time.md.
#pragma once

#include <tenferro/expr/build.hpp>
#include <tenferro/expr/derivative.hpp>
#include <tenferro/expr/eval/api.hpp>
#include <tenferro/expr/eval/into.hpp>
#include <tenferro/expr/nodes.hpp>
#include <tenferro/expr/to_string.hpp>
